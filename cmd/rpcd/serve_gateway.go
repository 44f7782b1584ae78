package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"

	"github.com/rpcd/rpcd/auth"
	"github.com/rpcd/rpcd/gateway"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
	"github.com/rpcd/rpcd/ws"
)

// gatewayFlags are serve's flags for the HTTP/JSON gateway.
type gatewayFlags struct {
	addr     string
	maxConns int
}

// defaultGatewayConns is -gateway-max-conns' default, the reactor's
// MaxConns default.
const defaultGatewayConns = 10000

func (f *gatewayFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "gateway", "", "also serve the routes as HTTP/JSON (POST /rpc/Controller/Action), JSON-RPC 2.0 (POST /jsonrpc), and rpcd over WebSocket at /ws, on this `address`; empty for none (docs/gateway.md)")
	fs.IntVar(&f.maxConns, "gateway-max-conns", 0, "with -gateway: most gateway connections open at once; past it, new ones wait to be accepted; 0 means 10000")
}

// check refuses flags that do not go together.
func (f *gatewayFlags) check() error {
	switch {
	case f.maxConns < 0:
		return usagef("-gateway-max-conns is %d, want 0 or more", f.maxConns)
	case f.maxConns != 0 && f.addr == "":
		return usagef("-gateway-max-conns goes with -gateway")
	}
	return nil
}

// httpGateway is serve's gateway: an http.Server over a gateway.Gateway.
type httpGateway struct {
	gw   *gateway.Gateway
	srv  *http.Server
	addr net.Addr
	done chan error // the result of Serve
}

// startGateway listens on f.addr and serves reg's routes through a
// gateway with the reactor's limits, compression (-compress-min), TLS and
// authenticator, JSON-RPC 2.0 at /jsonrpc, and WebSocket connections at
// /ws, which srv serves; nil when no -gateway is given.
func startGateway(srv *reactor.Server, f *gatewayFlags, reg *handler.Registry, limits proto.Limits, compressMin int, frameTimeout, idleTimeout time.Duration,
	tlsConfig *tls.Config, authenticator auth.Authenticator, logger *slog.Logger) (*httpGateway, error) {
	if f.addr == "" {
		return nil, nil
	}
	ln, err := reactor.Listen(f.addr)
	if err != nil {
		return nil, err
	}
	// At the cap, the listener stops accepting: a new connection waits in
	// the kernel's backlog until one closes (the main port instead sends
	// a GoAway; HTTP has no refusal that reaches a client reliably before
	// its request has been read).
	maxConns := f.maxConns
	if maxConns == 0 {
		maxConns = defaultGatewayConns
	}
	ln = netutil.LimitListener(ln, maxConns)
	if frameTimeout <= 0 {
		frameTimeout = 30 * time.Second // the reactor's default for a frame to arrive
	}
	if idleTimeout <= 0 {
		idleTimeout = 2 * time.Minute
	}
	g := &httpGateway{
		gw:   gateway.New(reg, gateway.Options{Limits: limits, CompressMin: compressMin, Authenticator: authenticator, Logger: logger}),
		addr: ln.Addr(),
		done: make(chan error, 1),
	}
	// A switch on the path, not a ServeMux: a mux answers some requests
	// itself (a redirect to a cleaned path), which nothing would count.
	// Every response is counted in the gateway's Stats, /ws's as "ws" and
	// /openapi.json's as "openapi".
	wsHandler := g.gw.Counted(gateway.RouteWebSocket, ws.Handler(srv, ws.Options{MaxFrameSize: limits.MaxFrameSize, Logger: logger}))
	jsonrpc := g.gw.JSONRPC()
	openapi := g.gw.OpenAPI(gateway.OpenAPIOptions{JSONRPCPath: gateway.JSONRPCPath})
	g.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case ws.Path:
				wsHandler.ServeHTTP(w, r)
			case gateway.JSONRPCPath:
				jsonrpc.ServeHTTP(w, r)
			case gateway.OpenAPIPath:
				openapi.ServeHTTP(w, r)
			default:
				g.gw.ServeHTTP(w, r)
			}
		}),
		ReadHeaderTimeout: frameTimeout,
		ReadTimeout:       frameTimeout, // the whole request, as for a frame
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	if tlsConfig != nil {
		cfg := tlsConfig.Clone()
		cfg.NextProtos = []string{"h2", "http/1.1"}
		g.srv.TLSConfig = cfg
		go func() { g.done <- g.srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { g.done <- g.srv.Serve(ln) }()
	}
	return g, nil
}

// counted returns the gateway, whose counters the admin listener exports;
// nil on a nil *httpGateway.
func (g *httpGateway) counted() *gateway.Gateway {
	if g == nil {
		return nil
	}
	return g.gw
}

// shutdown drains the reactor and the gateway (if any) at once: the
// gateway refuses new calls and waits for those it runs; it returns the
// first error.
func shutdown(ctx context.Context, srv *reactor.Server, g *httpGateway) error {
	if g == nil {
		return srv.Shutdown(ctx)
	}
	g.gw.Drain()
	gwErr := make(chan error, 1)
	go func() {
		err := g.srv.Shutdown(ctx)
		if serveErr := <-g.done; err == nil && !errors.Is(serveErr, http.ErrServerClosed) {
			err = serveErr
		}
		gwErr <- err
	}()
	err := srv.Shutdown(ctx)
	return errors.Join(err, <-gwErr)
}
