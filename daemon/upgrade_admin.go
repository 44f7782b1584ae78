package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
)

// UpgradePath is the admin listener's path that upgrades its daemon
// (WithUpgrades): POST only, from this machine only (a loopback address).
// It answers once the upgrade has ended: 200 with "upgraded: pid Q serves;
// pid P drains", 409 while another upgrade runs, 503 from a daemon that
// takes no upgrade now (draining), 500 with why the new process failed.
const UpgradePath = "/upgrade"

// upgradeHandler serves UpgradePath, with WithUpgrades, and h the rest.
func (d *Daemon) upgradeHandler(h http.Handler) http.Handler {
	if d.up == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != UpgradePath {
			h.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "rpcd: POST only", http.StatusMethodNotAllowed)
			return
		}
		if !fromLoopback(r.RemoteAddr) {
			http.Error(w, "rpcd: upgrades are asked for from this machine only", http.StatusForbidden)
			return
		}
		pid, err := d.Upgrade(r.Context())
		switch {
		case err == nil:
			fmt.Fprintf(w, "upgraded: pid %d serves; pid %d drains\n", pid, os.Getpid())
		case errors.Is(err, ErrUpgradeRunning):
			http.Error(w, err.Error(), http.StatusConflict)
		case errors.Is(err, ErrNoUpgrade):
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		default:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
}

// fromLoopback reports whether a request's remote address is a loopback
// one.
func fromLoopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	ip := net.ParseIP(host)
	return err == nil && ip != nil && ip.IsLoopback()
}

// RequestUpgrade asks the admin listener at addr (an unspecified host is
// this machine's loopback, as for Ready) to upgrade its daemon (POST
// UpgradePath), as rpcd upgrade does, and waits until the upgrade has ended
// or ctx ends. It returns the listener's answer ("upgraded: pid Q serves;
// pid P drains"), or an error that says why not: ErrUpgradeRunning while
// another upgrade runs, ErrNoUpgrade from a daemon that takes none, else
// the daemon's reason (the new process exited, or did not serve in time).
func RequestUpgrade(ctx context.Context, addr string) (string, error) {
	status, answer, url, err := askAdmin(ctx, http.MethodPost, addr, UpgradePath, 4096)
	if _, ok := err.(*ConfigError); ok {
		return "", err
	} else if err != nil {
		return "", fmt.Errorf("rpcd: cannot ask for an upgrade: %v", err)
	}
	refusal := func(sentinel error) error {
		detail := strings.TrimPrefix(strings.TrimPrefix(answer, sentinel.Error()), ": ")
		if detail != "" {
			detail = ": " + detail
		}
		return fmt.Errorf("%w%s (%s refused the upgrade)", sentinel, detail, addr)
	}
	switch status {
	case http.StatusOK:
		return answer, nil
	case http.StatusConflict:
		return "", refusal(ErrUpgradeRunning)
	case http.StatusServiceUnavailable:
		return "", refusal(ErrNoUpgrade)
	case http.StatusNotFound:
		return "", fmt.Errorf("%w: %s has no %s: a daemon that takes no upgrades", ErrNoUpgrade, addr, UpgradePath)
	case http.StatusUnauthorized:
		return "", fmt.Errorf("rpcd: %s requires authentication (admin-token-file, admin-client-ca): upgrade with SIGUSR2 instead, or POST %s with the credentials", addr, UpgradePath)
	}
	if status == http.StatusInternalServerError && strings.HasPrefix(answer, "rpcd: upgrade failed: ") {
		return "", errors.New(answer + "; the old process serves on")
	}
	return "", fmt.Errorf("rpcd: upgrade failed: %s answered %d %s: %s", url, status, http.StatusText(status), strings.TrimPrefix(answer, "rpcd: "))
}
