package daemon

import (
	"log/slog"

	sd "github.com/coreos/go-systemd/v22/daemon"
)

// Under systemd, in a unit of Type=notify, Run tells the service manager
// how it stands through $NOTIFY_SOCKET (sd_notify(3)): READY=1 once every
// listener serves and the node is registered, so that units ordered after
// rpcd start only then; STOPPING=1 when the drain begins. Each comes with
// a STATUS= line, which "systemctl status rpcd" shows. Without
// $NOTIFY_SOCKET nothing is sent.

// notifySystemd sends state to the service manager, if there is one; a
// failure is logged, not fatal: the unit's start timeout then says more.
func notifySystemd(logger *slog.Logger, state string) {
	// The variable stays set (false): STOPPING=1 follows READY=1.
	if _, err := sd.SdNotify(false, state); err != nil {
		logger.Warn("rpcd: cannot notify systemd", "state", state, "err", err)
	}
}
