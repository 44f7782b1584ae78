package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/rpcd/rpcd/admin"
	"github.com/rpcd/rpcd/gateway"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/metrics"
	"github.com/rpcd/rpcd/reactor"
)

// adminFlags are serve's flags for the admin listener.
type adminFlags struct {
	addr string
}

func (f *adminFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "admin", "", "serve metrics (/metrics), pprof, /healthz, /readyz and a live page (/) over HTTP on this `address`; empty for none (docs/operating.md)")
}

// count makes reg count its calls by route when the admin listener is on,
// and returns the counters; nil when it is off. Call it before any other
// Use, so that the calls other middleware refuses are counted too.
func (f *adminFlags) count(reg *handler.Registry) *metrics.Metrics {
	if f.addr == "" {
		return nil
	}
	m := metrics.New()
	reg.Use(m.Middleware())
	return m
}

// adminServer is serve's admin listener: an http.Server over an
// admin.Handler.
type adminServer struct {
	h    *admin.Handler
	srv  *http.Server
	done chan error // the result of Serve
}

// adminStopTimeout bounds how long stopping the admin listener waits for
// the requests it is answering (a scrape); a CPU profile being taken is
// cut off.
const adminStopTimeout = 2 * time.Second

// startAdmin listens on f.addr and serves the admin paths for srv, with
// the routes' counters m and the gateway's gw (nil without -gateway); nil
// when no -admin is given.
func startAdmin(f *adminFlags, srv *reactor.Server, m *metrics.Metrics, gw *gateway.Gateway, logger *slog.Logger) (*adminServer, error) {
	if f.addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return nil, err
	}
	h := admin.New(srv, admin.Options{Metrics: m, Gateway: gw})
	a := &adminServer{
		h: h,
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
		},
		done: make(chan error, 1),
	}
	go func() { a.done <- a.srv.Serve(ln) }()
	logger.Info("rpcd: admin serving", "admin", ln.Addr().String())
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
