package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
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
// gateway's, behind the admin listener's authentication, if any: over
// HTTPS with AdminTLSCert.
func (d *Daemon) startAdmin() (*adminServer, error) {
	ln := d.listeners.Admin
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", d.cfg.Admin); err != nil {
			return nil, err
		}
	}
	addr := ln.Addr()
	if d.adminTLS != nil {
		ln = tls.NewListener(ln, d.adminTLS)
	}
	h := admin.New(d.srv, admin.Options{Metrics: d.counted, Gateway: d.gw.counted(), Config: d.configStatus, CompressMin: d.cfg.CompressMin})
	a := &adminServer{
		h: h,
		srv: &http.Server{
			// POST /upgrade with WithUpgrades, /record/..., all behind the authentication
			Handler:           admin.Require(d.adminAuth, d.recordHandler(addr, d.upgradeHandler(h))),
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelDebug),
		},
		addr: addr,
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

// adminSecurity returns the admin listener's authentication (nil without
// any) and TLS configuration (nil for plain HTTP) from c's files: the
// token's first line, the certificate and the client CAs, which a client
// certificate that authenticates must be signed by. A client certificate
// is asked for but not required, so that the health probes need none.
// Each file that cannot be used is a ConfigError.
func adminSecurity(c *Config) (*admin.Auth, *tls.Config, error) {
	var a admin.Auth
	var cfg *tls.Config
	var errs []error
	if c.AdminTokenFile != "" {
		b, err := os.ReadFile(c.AdminTokenFile)
		line, _, _ := strings.Cut(string(b), "\n")
		a.Token = []byte(strings.TrimSpace(line))
		if err == nil && len(a.Token) == 0 {
			err = fmt.Errorf("rpcd: no token on the first line of %s", c.AdminTokenFile)
		}
		errs = append(errs, fileError(err, "admin-token-file", c.AdminTokenFile))
	}
	if c.AdminTLSCert != "" && c.AdminTLSKey != "" {
		files := []string{"admin-tls-cert", c.AdminTLSCert, "admin-tls-key", c.AdminTLSKey, "admin-client-ca", c.AdminClientCA}
		cert, err := tls.LoadX509KeyPair(c.AdminTLSCert, c.AdminTLSKey)
		if err != nil {
			errs = append(errs, fileError(fmt.Errorf("rpcd: loading the admin listener's certificate: %w", err), files...))
		} else {
			cfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		}
		if c.AdminClientCA != "" {
			pool, err := LoadCAs(c.AdminClientCA)
			errs = append(errs, fileError(err, files...))
			if cfg != nil && pool != nil {
				cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
				a.ClientCerts = true
			}
		}
	}
	if err := errors.Join(nonNil(errs)...); err != nil {
		return nil, nil, err
	}
	if !a.Configured() {
		return nil, cfg, nil
	}
	return &a, cfg, nil
}

// isLoopback reports whether the admin listener's address a is on this
// machine alone: a loopback IP address, or a Unix socket.
func isLoopback(a net.Addr) bool {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	}
	return false
}
