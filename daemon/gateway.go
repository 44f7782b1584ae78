package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"

	"github.com/rpcd/rpcd/gateway"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/ws"
)

// httpGateway is the daemon's gateway: an http.Server over a
// gateway.Gateway.
type httpGateway struct {
	gw   *gateway.Gateway
	srv  *http.Server
	addr net.Addr
	done chan error // the result of Serve
}

// The gateway's defaults where the reactor's settings that it takes are 0.
const (
	gatewayFrameTimeout = 30 * time.Second // a request to arrive: the reactor's default for a frame
	gatewayIdleTimeout  = 2 * time.Minute  // a connection kept between requests
)

// startGateway listens on Config.Gateway (or takes Listeners.Gateway) and
// serves the routes through a gateway with the reactor's limits,
// compression, TLS and authenticator, JSON-RPC 2.0 at /jsonrpc, the
// OpenAPI document at /openapi.json, and WebSocket connections at /ws,
// which the reactor serves.
func (d *Daemon) startGateway() (*httpGateway, error) {
	cfg, log := &d.cfg, d.log
	ln, err := listen(d.listeners.Gateway, cfg.Gateway)
	if err != nil {
		return nil, err
	}
	// At the cap, the listener stops accepting: a new connection waits in
	// the kernel's backlog until one closes (the RPC port instead sends a
	// GoAway; HTTP has no refusal that reaches a client reliably before
	// its request has been read).
	maxConns := cfg.GatewayMaxConns
	if maxConns == 0 {
		maxConns = DefaultConfig().GatewayMaxConns
	}
	ln = netutil.LimitListener(ln, maxConns)
	frameTimeout, idleTimeout := cfg.FrameTimeout, cfg.IdleTimeout
	if frameTimeout <= 0 {
		frameTimeout = gatewayFrameTimeout
	}
	if idleTimeout <= 0 {
		idleTimeout = gatewayIdleTimeout
	}
	limits := proto.Limits{MaxFrameSize: cfg.MaxFrame}
	cors, err := cfg.gatewayCORS()
	if err != nil { // Validate has said so
		return nil, errors.Join(err, ln.Close())
	}
	g := &httpGateway{
		gw: gateway.New(d.reg, gateway.Options{Limits: limits, CompressMin: cfg.CompressMin, CORS: cors,
			Authenticator: d.authenticator(), Logger: log}),
		addr: ln.Addr(),
		done: make(chan error, 1),
	}
	// A switch on the path, not a ServeMux: a mux answers some requests
	// itself (a redirect to a cleaned path), which nothing would count.
	// Every response is counted in the gateway's Stats, /ws's as "ws" and
	// /openapi.json's as "openapi".
	wsOpts := ws.Options{MaxFrameSize: limits.MaxFrameSize, Logger: log}
	if len(cors.Origins) > 0 {
		wsOpts.CheckOrigin = cors.CheckOrigin // the gateway's own origin and its CORS origins
	}
	wsHandler := g.gw.Counted(gateway.RouteWebSocket, ws.Handler(d.srv, wsOpts))
	jsonrpc := g.gw.JSONRPC()
	openapi := g.gw.OpenAPI(gateway.OpenAPIOptions{JSONRPCPath: gateway.JSONRPCPath})
	g.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if d.up.handingOver() && r.URL.Path != ws.Path { // after an upgrade: the next request goes to the new process
				w.Header().Set("Connection", "close")
			}
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
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	if tlsConfig := d.tlsConfig(true); tlsConfig != nil { // the running certificate's (security.go)
		g.srv.TLSConfig = tlsConfig
		go func() { g.done <- g.srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { g.done <- g.srv.Serve(ln) }()
	}
	return g, nil
}

// gatewayCORS returns the gateway's CORS policy: -gateway-cors and
// -gateway-cors-credentials.
func (c *Config) gatewayCORS() (gateway.CORS, error) {
	origins, err := gateway.ParseOrigins(c.GatewayCORS)
	if err != nil {
		return gateway.CORS{}, err
	}
	cors := gateway.CORS{Origins: origins, Credentials: c.GatewayCORSCred}
	return cors, cors.Validate()
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
func (d *Daemon) shutdown(ctx context.Context) error {
	g := d.gw
	if g == nil {
		return d.srv.Shutdown(ctx)
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
	err := d.srv.Shutdown(ctx)
	return errors.Join(err, <-gwErr)
}
