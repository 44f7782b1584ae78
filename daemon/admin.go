package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/rpcd/rpcd/admin"
)

// adminServer is the daemon's admin listener: an http.Server over an
// admin.Handler.
type adminServer struct {
	h    *admin.Handler
	srv  *http.Server
	addr net.Addr
	done chan error // the result of Serve
}

// adminStopTimeout bounds how long stopping the admin listener waits for
// the requests it is answering (a scrape); a CPU profile being taken is
// cut off.
const adminStopTimeout = 2 * time.Second

// startAdmin listens on Config.Admin (or takes Listeners.Admin) and serves
// the admin paths for the reactor, with the routes' counters and the
// gateway's.
func (d *Daemon) startAdmin() (*adminServer, error) {
	ln := d.listeners.Admin
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", d.cfg.Admin); err != nil {
			return nil, err
		}
	}
	h := admin.New(d.srv, admin.Options{Metrics: d.counted, Gateway: d.gw.counted(), Config: d.configStatus, CompressMin: d.cfg.CompressMin})
	a := &adminServer{
		h: h,
		srv: &http.Server{
			Handler:           d.upgradeHandler(h), // POST /upgrade, with WithUpgrades
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelDebug),
		},
		addr: ln.Addr(),
		done: make(chan error, 1),
	}
	go func() { a.done <- a.srv.Serve(ln) }()
	return a, nil
}

// stop closes the admin listener, letting the requests it answers finish
// for up to adminStopTimeout. It does nothing on a nil *adminServer.
func (a *adminServer) stop() {
	if a == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminStopTimeout)
	defer cancel()
	if err := a.srv.Shutdown(ctx); err != nil {
		a.srv.Close()
	}
	if err := <-a.done; !errors.Is(err, http.ErrServerClosed) {
		a.srv.ErrorLog.Printf("rpcd: admin listener: %v", err)
	}
	_ = a.h.Close()
}
