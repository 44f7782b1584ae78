package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/admin"
	"github.com/rpcd/rpcd/discovery/etcd"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/metrics"
	"github.com/rpcd/rpcd/otelrpcd"
	"github.com/rpcd/rpcd/otelrpcd/otelenv"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// Daemon is rpcd serve as a library: a server of a registry's routes on
// the RPC port, with, as its Config asks, the HTTP gateway, the admin
// listener, TLS, authentication, topic permissions, rate limits and a
// node in etcd. Make one with New, add routes to Registry, and Run it.
type Daemon struct {
	cfg       Config
	listeners Listeners
	log       *slog.Logger
	logOut    io.Writer
	meta      map[string]string // the node's in etcd
	etcd      etcd.Config
	traceEnv  bool
	tracing   *otelenv.Tracing

	sec     atomic.Pointer[security] // what a reload swaps (security.go)
	level   slog.LevelVar            // the daemon's own logger's level: the running security's
	reloads reloads                  // reload.go

	reg      *handler.Registry
	srv      *reactor.Server
	counted  *metrics.Metrics // the calls by route, with an admin listener
	draining atomic.Bool      // from the drain on, Sys/Health says NOT_SERVING

	ran           atomic.Bool
	ready         chan struct{} // closed once Run serves
	gw            *httpGateway
	adm           *adminServer
	node          *registration   // in etcd
	up            *upgrades       // binary upgrades (WithUpgrades); nil without
	closed        context.Context // ended by Close
	close         context.CancelFunc
	gwAddr, admin net.Addr

	adminAuth *admin.Auth         // the admin listener's authentication (admin.go); nil without
	adminTLS  *tls.Config         // its TLS; nil for plain HTTP
	loopback  func(net.Addr) bool // whether the admin listener is on loopback (isLoopback; a test's may differ)
	rec       recording           // the recording under way, if any (recording.go)
}

// Listeners are listeners a program gives the daemon instead of the
// addresses of its Config (sockets systemd or a test opened). A nil field
// leaves the Config's address to listen on; a Gateway or Admin listener
// turns that listener on whatever the Config says. Run closes them. An
// upgrade (WithUpgrades) hands over only the listeners the daemon opened.
type Listeners struct {
	RPC, Gateway, Admin net.Listener
}

// An Option sets what a Daemon takes beside its Config.
type Option func(*Daemon)

// WithListeners has the daemon serve on l's listeners.
func WithListeners(l Listeners) Option { return func(d *Daemon) { d.listeners = l } }

// WithLogger has the daemon log to l instead of a logger of its own (one
// writing to standard error, at Config.LogLevel, in Config.LogFormat).
func WithLogger(l *slog.Logger) Option { return func(d *Daemon) { d.log = l } }

// WithLogOutput has the daemon's own logger write to w instead of
// standard error.
func WithLogOutput(w io.Writer) Option { return func(d *Daemon) { d.logOut = w } }

// WithTracingFromEnv has the daemon make a server span per call, the
// child of the traceparent the call carries, as the OTEL_* environment
// asks (otelenv.FromEnv; none without an endpoint), and export the last
// spans once Run has drained, as rpcd serve does. A variable whose value
// cannot be followed is a ConfigError of New.
func WithTracingFromEnv() Option { return func(d *Daemon) { d.traceEnv = true } }

// Signal is a cause (context.WithCancelCause) to end Run's context with
// when a signal stops the daemon: Run names it in its log and in the
// status it gives systemd ("draining on terminated").
type Signal struct{ os.Signal }

func (s Signal) Error() string { return "rpcd: " + s.String() }

// New checks cfg, reads the files it names and builds the daemon, which
// serves nothing until Run. Every mistake, cfg's (Validate) and its
// files', is returned at once, each a *ConfigError, joined.
func New(cfg Config, opts ...Option) (*Daemon, error) {
	d := &Daemon{cfg: cfg, logOut: os.Stderr, ready: make(chan struct{})}
	for _, o := range opts {
		o(d)
	}
	r, errs := cfg.check()
	sec, err := newSecurity(&cfg, r)
	errs = append(errs, unjoin(err)...)
	d.adminAuth, d.adminTLS, err = adminSecurity(&cfg)
	errs = append(errs, unjoin(err)...)
	errs = append(errs, cfg.checkRecord())
	d.loopback = isLoopback
	if cfg.Etcd != "" && cfg.checkEtcdAccess() == nil { // else check said why
		d.etcd, err = cfg.EtcdConfig()
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	d.meta = r.meta
	sec.generation = 1
	d.sec.Store(sec)
	d.level.Set(sec.level)
	if d.log == nil {
		hopts := &slog.HandlerOptions{Level: &d.level}
		if cfg.LogFormat == "json" {
			d.log = slog.New(slog.NewJSONHandler(d.logOut, hopts))
		} else {
			d.log = slog.New(slog.NewTextHandler(d.logOut, hopts))
		}
	}

	d.reg = handler.NewRegistry()
	if d.adminOn() { // before other middleware, to count what it refuses
		d.counted = metrics.New()
		d.reg.Use(d.counted.Middleware())
	}
	if d.traceEnv { // spans of every call, refusals too
		if d.tracing, err = otelenv.FromEnv(context.Background(), otelenv.Options{ServiceName: "rpcd", Logger: d.log}); err != nil {
			return nil, configErrorf("%s", bare(err))
		}
		if d.tracing.Provider != nil {
			d.reg.Use(otelrpcd.Middleware(d.tracing.Provider))
			endpoint := d.tracing.Endpoint
			if endpoint == "" {
				endpoint = "the exporter's default"
			}
			d.log.Info("rpcd: exporting spans", "protocol", d.tracing.Protocol, "endpoint", endpoint)
		}
	}
	d.reg.Use(d.guard()) // roles, then rate limits: those of the running security (security.go)
	builtin.Register(d.reg)
	builtin.HandleStats(d.reg, func() int { return d.srv.Conns() })
	builtin.HandleHealth(d.reg, func() bool { return !d.draining.Load() && d.srv.Ready() })

	ro := cfg.reactorOptions()
	if cfg.Loops == 0 {
		ro.Loops = defaultLoops(d.gatewayOn())
	}
	ro.TLS, ro.Authenticator, ro.Topics, ro.Logger = d.tlsConfig(false), d.authenticator(), topicPolicy{d}, d.log
	d.srv = reactor.New(d.reg, ro)
	d.closed, d.close = context.WithCancel(context.Background())
	return d, nil
}

// Registry returns the registry the daemon serves, with the built-in
// routes (Sys/*, Math/Sum, Bench/*) and the middleware its Config asks
// for: the admin listener's counters, spans, then roles and rate limits,
// those a reload last applied (none until some are set), in that order.
// Routes and middleware added to it before Run are served; a middleware
// added (Use) runs inside those.
func (d *Daemon) Registry() *handler.Registry { return d.reg }

// Server returns the reactor serving the RPC port: for Publish,
// Broadcast, Peers and Stats.
func (d *Daemon) Server() *reactor.Server { return d.srv }

// Logger returns the logger the daemon logs to.
func (d *Daemon) Logger() *slog.Logger { return d.log }

// Ready returns a channel closed once Run serves: every listener
// accepts and the node is registered.
func (d *Daemon) Ready() <-chan struct{} { return d.ready }

// Addr returns the address of the RPC port, once Run listens.
func (d *Daemon) Addr() net.Addr { return d.srv.Addr() }

// GatewayAddr and AdminAddr return the addresses of the gateway and the
// admin listener once Run serves; nil for a listener that is off.
func (d *Daemon) GatewayAddr() net.Addr { return d.readyAddr(&d.gwAddr) }

// AdminAddr: see GatewayAddr.
func (d *Daemon) AdminAddr() net.Addr { return d.readyAddr(&d.admin) }

func (d *Daemon) readyAddr(a *net.Addr) net.Addr {
	select {
	case <-d.ready:
		return *a
	default:
		return nil
	}
}

// Close stops a Run at once, serving or draining: the calls still in
// flight are cancelled, and Run returns soon after. A daemon closed
// before Run never runs, and what New started (tracing) stops.
func (d *Daemon) Close() error {
	d.close()
	if d.ran.CompareAndSwap(false, true) {
		d.stopTracing()
	}
	return nil
}

// Run serves until ctx ends, then drains, and returns once every listener
// is closed. It listens (or takes the Listeners given), registers the node
// in etcd, logs "rpcd: serving" and tells systemd it is ready (sd_notify,
// where $NOTIFY_SOCKET is set). When ctx ends (or Close is called) it
// stops in this order: Sys/Health says NOT_SERVING, the node leaves etcd,
// systemd hears STOPPING, the gateway and the server send GoAway and
// answer the calls in flight for up to DrainTimeout, the admin listener
// closes (it says 503 on /readyz meanwhile), and last the spans still
// buffered are exported (WithTracingFromEnv). With WithUpgrades, an
// upgrade whose new process serves ends Run too, through a drain that
// leaves it what it took over (Upgrade). An error means it could not
// serve (logged), or that calls were still in flight when the drain ended
// (cancelled).
func (d *Daemon) Run(ctx context.Context) error {
	if !d.ran.CompareAndSwap(false, true) {
		return errors.New("rpcd: daemon: Run after Close, or a second time")
	}
	if err := d.start(); err != nil {
		d.stopTracing()
		return err
	}
	select {
	case <-ctx.Done():
	case <-d.closed.Done():
	case <-d.up.handedOver(): // an upgrade's new process serves
		return d.handOver()
	}
	return d.drain(context.Cause(ctx))
}

// SameSignal is how soon after the signal that began a drain another
// counts as the same request, not a second one that cuts the drain short:
// `timeout` signals its child and then its whole process group, and a
// shell may do the like.
const SameSignal = 500 * time.Millisecond

// ErrSecondSignal is RunSignals' error when a second signal cut the drain
// short.
var ErrSecondSignal = errors.New("rpcd: daemon: a second signal cut the drain short")

// RunSignals runs the daemon until a signal comes on sigs, as rpcd serve
// does on SIGINT and SIGTERM: the first begins the drain (Signal{sig} is
// its cause); the same again within SameSignal is taken for the same
// request; another after that stops the drain at once (Close). SIGHUP
// reloads the configuration instead (WithReloadFrom, Reload); with
// WithUpgrades, SIGUSR2 upgrades (Upgrade). It returns Run's error, or
// ErrSecondSignal.
func (d *Daemon) RunSignals(sigs <-chan os.Signal) error {
	ctx, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	upgradeSigs, stopUpgradeSigs := d.up.signals()
	defer stopUpgradeSigs()
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var first time.Time // of the signal that began the drain
	for {
		select {
		case err := <-done:
			return err
		case <-upgradeSigs:
			go d.Upgrade(context.Background()) // which logs how it ends
		case sig := <-sigs:
			if isReload(sig) { // SIGHUP: reload.go
				d.reloadOnSignal()
				continue
			}
			switch {
			case first.IsZero():
				first = time.Now()
				stop(Signal{sig})
			case time.Since(first) < SameSignal:
				d.log.Debug("rpcd: a repeat of the signal that began the drain; draining on", "signal", sig.String())
			default:
				d.log.Error("rpcd: second signal; exiting without draining", "signal", sig.String())
				d.Close()
				<-done
				return ErrSecondSignal
			}
		}
	}
}

// start opens the listeners and registers the node, undoing what it did
// if one fails; then the daemon serves.
func (d *Daemon) start() error {
	cfg := &d.cfg
	fail := func(msg string, err error, attrs ...any) error {
		d.log.Error(msg, append(attrs, "err", err)...)
		d.up.stop()
		_ = d.shutdown(context.Background())
		d.stopRecording()
		d.adm.stop()
		for _, ln := range []net.Listener{d.listeners.Gateway, d.listeners.Admin} {
			if ln != nil {
				ln.Close()
			}
		}
		return fmt.Errorf("%s: %w", msg, err)
	}
	setting, err := d.up.listen() // the listeners to hand over on an upgrade, maybe inherited
	if err != nil {
		return fail("rpcd: cannot listen", err, setting...)
	}
	ln, err := listen(d.listeners.RPC, cfg.Addr)
	if err == nil {
		if err = d.startConfigRecording(ln.Addr()); err != nil { // from the first connection
			ln.Close()
			return fail("rpcd: cannot record", err, "record", cfg.Record)
		}
		err = d.srv.StartOn(ln)
	}
	if err != nil {
		return fail("rpcd: cannot listen", err, "addr", cfg.Addr)
	}
	if d.gatewayOn() {
		if d.gw, err = d.startGateway(); err != nil {
			return fail("rpcd: cannot listen", err, "gateway", cfg.Gateway)
		}
		d.gwAddr = d.gw.addr
		d.log.Info("rpcd: gateway serving", "gateway", d.gwAddr.String(), "tls", d.sec.Load().tls != nil)
	}
	if d.adminOn() {
		if d.adm, err = d.startAdmin(); err != nil {
			return fail("rpcd: cannot listen", err, "admin", cfg.Admin)
		}
		d.admin = d.adm.addr
		d.log.Info("rpcd: admin serving", "admin", d.admin.String())
	}
	if cfg.Etcd != "" {
		if err := d.register(); err != nil {
			return fail("rpcd: cannot register in etcd", err, "etcd", cfg.Etcd, "service", cfg.Service)
		}
	}
	if err := d.writePIDFile(); err != nil {
		return fail("rpcd: cannot write the pid file", err, "pid-file", cfg.PIDFile)
	}
	// What serves the connections (reactor.Server.Transport): event
	// loops, epoll or kqueue, and how many; or, over TLS and on Windows,
	// the standard library's transport, a goroutine per connection, with
	// no loops to report.
	attrs := []any{"addr", d.srv.Addr().String(), "transport", d.srv.Transport()}
	if n := d.srv.Loops(); n > 0 {
		attrs = append(attrs, "loops", n)
	}
	sec := d.sec.Load()
	d.log.Info("rpcd: serving", append(attrs,
		"GOMAXPROCS", runtime.GOMAXPROCS(0),
		"routes", len(d.reg.Routes()),
		"tls", sec.tls != nil,
		"auth", sec.authenticator != nil,
		"topics", sec.topics != nil,
		"compression", compressionText(cfg.CompressMin))...)
	d.notifyReady("serving on " + d.srv.Addr().String()) // and to the old process of an upgrade
	close(d.ready)
	return nil
}

// drain stops serving, in Run's order, after ctx ended with cause.
func (d *Daemon) drain(cause error) error {
	timeout := d.cfg.DrainTimeout.String()
	d.draining.Store(true)
	d.up.stop() // no upgrade from here on; one running is stopped
	var sig Signal
	if errors.As(cause, &sig) {
		d.log.Info("rpcd: draining", "signal", sig.String(), "timeout", timeout)
	} else {
		d.log.Info("rpcd: draining", "timeout", timeout)
	}
	d.deregister() // out of etcd before the GoAways: clients move their new calls elsewhere
	status := "draining"
	if sig.Signal != nil {
		status += " on " + sig.String()
	}
	notifySystemd(d.log, "STOPPING=1\nSTATUS="+status)
	ctx, cancel := context.WithTimeout(d.closed, d.cfg.DrainTimeout)
	defer cancel()
	err := d.shutdown(ctx)
	d.stopRecording() // with the drain's last frames
	closed := d.closed.Err() != nil
	if err != nil && !closed {
		d.log.Error("rpcd: drain timed out; calls still in flight were cancelled", "timeout", timeout, "err", err)
	}
	d.adm.stop()    // last: /readyz says 503 and /metrics answers while the drain lasts
	d.stopTracing() // the spans of the drain too
	d.removePIDFile()
	if !closed {
		d.log.Info("rpcd: stopped")
	}
	return err
}

// stopTracing exports the spans still buffered.
func (d *Daemon) stopTracing() {
	if d.tracing == nil || d.tracing.Provider == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
	defer cancel()
	if err := d.tracing.Shutdown(ctx); err != nil {
		d.log.Warn("rpcd: exporting the last spans", "err", err)
	}
}

// tracingFlushTimeout bounds the export of the spans still buffered when
// Run returns.
const tracingFlushTimeout = 5 * time.Second

func (d *Daemon) gatewayOn() bool { return d.cfg.Gateway != "" || d.listeners.Gateway != nil }
func (d *Daemon) adminOn() bool   { return d.cfg.Admin != "" || d.listeners.Admin != nil }

// listen returns ln, or if it is nil a listener on addr (reactor.Listen).
func listen(ln net.Listener, addr string) (net.Listener, error) {
	if ln != nil {
		return ln, nil
	}
	return reactor.Listen(addr)
}

// defaultLoops is the number of event loops the daemon runs when
// Config.Loops is 0: one per P, for a process that serves rpcd alone, or
// with the HTTP gateway the reactor's default, which leaves a P to the
// rest. An event loop waiting in epoll_wait keeps its P
// (reactor.Options.Loops): with a loop on every P, the gateway's
// connections, which wait in Go's own network poller, were served when
// sysmon polled it, every 10 ms: under RPC load its calls took 7.2 ms at
// p90, against 0.41 ms with a P left to them, and it served a thirteenth
// of the requests (docs/performance.md, "Event loops and Ps").
func defaultLoops(gateway bool) int {
	if gateway {
		return reactor.DefaultLoops()
	}
	return runtime.GOMAXPROCS(0)
}

// compressionText says, for the serving line, what CompressMin makes of
// compression: "off", or the compressions clients may ask for and the
// smallest reply compressed.
func compressionText(least int) string {
	switch {
	case least < 0:
		return "off"
	case least == 0:
		least = proto.DefaultCompressMin
	}
	return string(proto.AppendCompressionList(nil, compression.Supported()...)) + " from " + strconv.Itoa(least) + " B"
}
