package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"io"
	"log/slog"
	"math"
	"net"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/auth"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/load"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/ratelimit"
	"github.com/rpcd/rpcd/reactor"
)

var serveCmd = &command{
	name:     "serve",
	synopsis: "[flags]",
	summary:  "serve the built-in routes",
	about: `Serve listens on -addr and serves the built-in routes (Sys/*, Math/Sum,
Bench/*) on gnet event loops (epoll on Linux, kqueue on macOS and FreeBSD;
on Windows, and over TLS, a goroutine per connection), logging to standard
error. Once listening it logs "rpcd: serving" with the address it is bound
to and the transport. On SIGINT or SIGTERM it drains: it sends GoAway on
every connection, answers the calls in flight for up to -drain-timeout,
logs "rpcd: stopped" and exits 0, or 1 if the calls outlast
-drain-timeout. A second signal, half a second or more after the first,
exits at once with status 1. Mistakes in the flags, the environment or the
file are all reported before it listens, with exit status 78.`,
	example: `rpcd serve -addr 127.0.0.1:7070 -log-format json`,
	setup:   setupServe,
}

// serveFlags are serve's flags.
type serveFlags struct {
	addr         string
	loops        int
	maxFrame     int
	maxInflight  int
	drainTimeout time.Duration
	logLevel     string
	logFormat    string

	maxConns, maxOutbound                              int
	maxSubscriptions, subscriberQueue                  int
	slowSubscriber                                     string
	frameTimeout, idleTimeout, keepAlive, writeTimeout time.Duration
	keepAliveTimeout, handshakeTimeout                 time.Duration
	security                                           securityFlags
	chaosLedger                                        string
	rateLimit                                          string
	compressMin                                        int
	gateway                                            gatewayFlags
	admin                                              adminFlags
	etcd                                               etcdFlags
}

// setupServe defines serve's flags; see command.setup.
func setupServe(fs *flag.FlagSet) func(*cli, []string) error {
	f := &serveFlags{}
	fs.StringVar(&f.addr, "addr", defaultAddr, "`address` to listen on: host:port (port 0 picks one), or unix:///path")
	fs.IntVar(&f.loops, "loops", 0, "number of event loops; 0 means GOMAXPROCS, or one fewer (at least 1) with -gateway")
	fs.IntVar(&f.maxFrame, "max-frame", proto.DefaultMaxFrameSize, "largest frame read or written, header included, in `bytes`")
	fs.IntVar(&f.maxInflight, "max-inflight", 0, "blocking calls in flight per connection; 0 means the reactor's default")
	fs.DurationVar(&f.drainTimeout, "drain-timeout", 10*time.Second, "how long a shutdown waits for the calls in flight")
	fs.StringVar(&f.logLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "text", "log `format`: text or json")
	fs.IntVar(&f.maxConns, "max-conns", 0, "most connections open at once; 0 means the reactor's default (10000)")
	fs.IntVar(&f.maxOutbound, "max-outbound", 0, "unsent output per connection past which it stops being read until its peer reads; 0 means 8 MiB")
	fs.IntVar(&f.maxSubscriptions, "max-subscriptions", 0, "publish/subscribe: subscriptions per connection; 0 means 1024")
	fs.IntVar(&f.subscriberQueue, "subscriber-queue", 0, "publish/subscribe: bytes a subscriber may have waiting before -slow-subscriber applies; 0 means 1 MiB")
	fs.StringVar(&f.slowSubscriber, "slow-subscriber", "drop", "publish/subscribe: what a full subscriber queue does: `drop` its messages or cutoff the subscriber")
	fs.DurationVar(&f.frameTimeout, "frame-timeout", 0, "longest time from a frame's first byte to its last; 0 means 30s")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", 0, "close connections that send nothing for this long; 0 means never (keep-alive pings find dead ones)")
	fs.DurationVar(&f.keepAlive, "keepalive", 0, "ping a connection silent for this long; 0 means 30s, negative never")
	fs.DurationVar(&f.keepAliveTimeout, "keepalive-timeout", 0, "close a connection that does not answer a ping within this; 0 means 10s")
	fs.DurationVar(&f.writeTimeout, "write-timeout", 0, "cut off a connection whose peer reads none of its output for this long; 0 means 30s")
	fs.DurationVar(&f.handshakeTimeout, "handshake-timeout", 0, "with authentication or TLS: how long a connection has to complete it; 0 means 5s")
	fs.StringVar(&f.rateLimit, "rate-limit", "", "hold routes to rates, as `ROUTE=RATE[:BURST],...` in calls a second (burst: at once, default a second's worth); route * is every route not listed, each on its own; past it a call gets ResourceExhausted")
	fs.IntVar(&f.compressMin, "compress-min", 0, "smallest reply payload compressed, in `bytes`, for a client that asks (zstd or gzip; on the gateway, by Accept-Encoding); 0 means 1024, negative turns compression off")
	f.security.define(fs)
	f.gateway.define(fs)
	f.admin.define(fs)
	f.etcd.define(fs)
	fs.String(configFlag, "", "read flags not given on the command line from this YAML `file` (default $RPCD_CONFIG); each flag is also $RPCD_NAME (docs/configuration.md)")
	fs.StringVar(&f.chaosLedger, "chaos-ledger", "", "serve "+load.ChaosRecord+", which appends its argument to this `file` each time it runs (for rpcd chaos)")
	return func(c *cli, args []string) error { return c.serve(f, args) }
}

func (c *cli) serve(f *serveFlags, args []string) error {
	var confErr error
	if c.conf != nil {
		confErr = c.conf.err
	}
	sc, err := f.check(args, confErr, c.stderr)
	if err != nil {
		return err
	}
	tlsConfig, authenticator, topics, logger := sc.tlsConfig, sc.authenticator, sc.topics, sc.logger
	if c.conf != nil {
		for _, w := range c.conf.warnings {
			logger.Warn("rpcd: " + w)
		}
		c.conf.warned = true
	}

	reg := handler.NewRegistry()
	counted := f.admin.count(reg) // nil without -admin; before other middleware, to count what it refuses
	// Spans as the OTEL_* environment asks (none without it), of every
	// call, refusals too; exported last, after the drain.
	stopTracing, err := startTracing(reg, logger)
	if err != nil {
		return err
	}
	defer stopTracing()
	if sc.roles != nil {
		reg.Use(auth.Require(auth.Roles(sc.roles)))
	}
	if sc.limits != nil {
		reg.Use(ratelimit.PerRoute(sc.limits)) // after authorization: calls refused by it take no token
	}
	builtin.Register(reg)
	var srv *reactor.Server // set below, before any call can reach Sys/Stats
	builtin.HandleStats(reg, func() int { return srv.Conns() })
	var draining atomic.Bool // from the signal on, Sys/Health says NOT_SERVING
	builtin.HandleHealth(reg, func() bool { return !draining.Load() && srv.Ready() })
	if f.chaosLedger != "" {
		closeLedger, err := load.HandleChaosRecord(reg, f.chaosLedger)
		if err != nil {
			return fileError(err, map[string]string{"chaos-ledger": f.chaosLedger})
		}
		defer closeLedger()
	}
	if c.register != nil {
		c.register(reg)
	}
	loops := f.loops
	if loops == 0 {
		loops = defaultLoops(f.gateway.addr != "")
	}
	opts := reactor.Options{
		Loops:            loops,
		Limits:           proto.Limits{MaxFrameSize: f.maxFrame},
		MaxInflight:      f.maxInflight,
		MaxConns:         f.maxConns,
		MaxOutbound:      f.maxOutbound,
		MaxSubscriptions: f.maxSubscriptions,
		SubscriberQueue:  f.subscriberQueue,
		SlowSubscriber:   map[string]reactor.SlowPolicy{"drop": reactor.DropMessages, "cutoff": reactor.CutOff}[f.slowSubscriber],
		FrameTimeout:     f.frameTimeout,
		IdleTimeout:      f.idleTimeout,
		KeepAlive:        f.keepAlive,
		KeepAliveTimeout: f.keepAliveTimeout,
		WriteTimeout:     f.writeTimeout,
		HandshakeTimeout: f.handshakeTimeout,
		CompressMin:      f.compressMin,
		TLS:              tlsConfig,
		Authenticator:    authenticator,
		Logger:           logger,
	}
	if topics != nil { // a nil *TopicPermissions in the interface would not be nil
		opts.Topics = topics
	}
	srv = reactor.New(reg, opts)

	// Subscribe before listening: a signal that comes once the address is
	// logged must drain, not kill the process.
	sigs, stopSignals := c.signals()
	defer stopSignals()

	if err := srv.Start(f.addr); err != nil {
		logger.Error("rpcd: cannot listen", "addr", f.addr, "err", err)
		return exitStatus(exitFail)
	}
	gw, err := startGateway(srv, &f.gateway, reg, proto.Limits{MaxFrameSize: f.maxFrame}, f.compressMin, f.frameTimeout, f.idleTimeout, tlsConfig, authenticator, logger)
	if err != nil {
		logger.Error("rpcd: cannot listen", "gateway", f.gateway.addr, "err", err)
		_ = srv.Shutdown(context.Background())
		return exitStatus(exitFail)
	}
	if gw != nil {
		logger.Info("rpcd: gateway serving", "gateway", gw.addr.String(), "tls", tlsConfig != nil)
	}
	adm, err := startAdmin(&f.admin, srv, counted, gw.counted(), logger)
	if err != nil {
		logger.Error("rpcd: cannot listen", "admin", f.admin.addr, "err", err)
		_ = shutdown(context.Background(), srv, gw)
		return exitStatus(exitFail)
	}
	defer adm.stop() // after the drain: /readyz says 503 and /metrics answers while it lasts
	registered, err := f.etcd.register(srv.Addr(), reg, logger)
	if err != nil {
		logger.Error("rpcd: cannot register in etcd", "etcd", f.etcd.endpoints, "service", f.etcd.service, "err", err)
		_ = shutdown(context.Background(), srv, gw)
		return exitStatus(exitFail)
	}
	// What serves the connections (reactor.Server.Transport): event loops,
	// epoll or kqueue, and how many; or, over TLS and on Windows, the
	// standard library's transport, a goroutine per connection, with no
	// loops to report.
	transport := []any{"transport", srv.Transport()}
	if n := srv.Loops(); n > 0 {
		transport = append(transport, "loops", n)
	}
	logger.Info("rpcd: serving", append(append([]any{"addr", srv.Addr().String()}, transport...),
		"GOMAXPROCS", runtime.GOMAXPROCS(0),
		"routes", len(reg.Routes()),
		"tls", tlsConfig != nil,
		"auth", authenticator != nil,
		"topics", topics != nil,
		"compression", compressionText(f.compressMin))...)
	notifySystemd(logger, "READY=1\nSTATUS=serving on "+srv.Addr().String())

	sig := <-sigs
	first := time.Now()
	logger.Info("rpcd: draining", "signal", sig.String(), "timeout", f.drainTimeout.String())
	notifySystemd(logger, "STOPPING=1\nSTATUS=draining on "+sig.String())
	draining.Store(true)
	registered.deregister() // out of etcd before the GoAways: clients move their new calls elsewhere
	ctx, cancel := context.WithTimeout(context.Background(), f.drainTimeout)
	defer cancel() // on a second signal, also cuts the drain short
	done := make(chan error, 1)
	go func() { done <- shutdown(ctx, srv, gw) }()
	for {
		select {
		case err := <-done:
			if err != nil {
				logger.Error("rpcd: drain timed out; calls still in flight were cancelled", "timeout", f.drainTimeout.String(), "err", err)
				logger.Info("rpcd: stopped")
				return exitStatus(exitFail)
			}
			logger.Info("rpcd: stopped")
			return nil
		case sig := <-sigs:
			if time.Since(first) < sameSignal {
				// One stop sent twice: `timeout` signals its child and then
				// its whole process group, and a shell may do the like.
				logger.Debug("rpcd: a repeat of the signal that began the drain; draining on", "signal", sig.String())
				continue
			}
			logger.Error("rpcd: second signal; exiting without draining", "signal", sig.String())
			return exitStatus(exitFail)
		}
	}
}

// serveConfig is what serve's flags make once checked: the files they
// name read, the rules they give parsed.
type serveConfig struct {
	tlsConfig     *tls.Config
	authenticator auth.Authenticator
	roles         map[string][]string
	topicRules    map[string]auth.TopicRules
	topics        *auth.TopicPermissions
	limits        map[string]ratelimit.Limit
	logger        *slog.Logger
}

// check checks serve's arguments and flags and reads the files they name,
// before anything listens. It reports every mistake at once, those of the
// configuration (confErr) first: usage errors, joined.
func (f *serveFlags) check(args []string, confErr error, logTo io.Writer) (*serveConfig, error) {
	errs := []error{confErr}
	add := func(err error) { errs = append(errs, err) } // errors.Join drops nil
	if len(args) > 0 {
		add(usagef("unexpected argument %q", args[0]))
	}
	if f.loops < 0 {
		add(usagef("-loops is %d, want 0 or more", f.loops))
	}
	if f.maxFrame < proto.HeaderSize {
		add(usagef("-max-frame is %d, want at least %d", f.maxFrame, proto.HeaderSize))
	}
	if f.maxInflight < 0 {
		add(usagef("-max-inflight is %d, want 0 or more", f.maxInflight))
	}
	if f.drainTimeout <= 0 {
		add(usagef("-drain-timeout is %v, want more than 0", f.drainTimeout))
	}
	if f.maxConns < 0 || f.maxOutbound < 0 || f.maxSubscriptions < 0 || f.subscriberQueue < 0 {
		add(usagef("-max-conns, -max-outbound, -max-subscriptions and -subscriber-queue want 0 or more"))
	}
	if f.slowSubscriber != "drop" && f.slowSubscriber != "cutoff" {
		add(usagef("-slow-subscriber is %q, want drop or cutoff", f.slowSubscriber))
	}
	if f.frameTimeout < 0 || f.idleTimeout < 0 || f.keepAliveTimeout < 0 || f.writeTimeout < 0 || f.handshakeTimeout < 0 {
		add(usagef("-frame-timeout, -idle-timeout, -keepalive-timeout, -write-timeout and -handshake-timeout want 0 or more"))
	}
	add(checkListenAddr("addr", f.addr, true))
	if f.gateway.addr != "" {
		add(checkListenAddr("gateway", f.gateway.addr, true))
	}
	if f.admin.addr != "" {
		add(checkListenAddr("admin", f.admin.addr, false))
	}
	add(f.etcd.check(f.addr))
	add(f.gateway.check())

	sc := &serveConfig{}
	var err error
	sc.tlsConfig, err = f.security.tlsConfig()
	add(fileError(err, map[string]string{"tls-cert": f.security.tlsCert, "tls-key": f.security.tlsKey, "tls-client-ca": f.security.tlsClientCA}))
	sc.authenticator, err = f.security.authenticator()
	add(fileError(err, map[string]string{"auth-tokens": f.security.authTokens, "auth-hmac-key": f.security.authHMACKeyFile}))
	sc.roles, err = f.security.requireRoles()
	add(err)
	sc.topicRules, err = f.security.topicRules()
	add(err)
	if sc.topicRules != nil {
		if sc.topics, err = auth.Topics(sc.topicRules); err != nil {
			add(usagef("-auth-topics: %v", strings.TrimPrefix(err.Error(), "rpcd: auth: ")))
		}
	}
	sc.limits, err = parseRateLimits(f.rateLimit)
	add(err)
	sc.logger, err = newLogger(logTo, f.logLevel, f.logFormat)
	add(err)
	// Whether the flags ask for a way to authenticate (or TLS), whether or
	// not its files could be read.
	s := &f.security
	authenticates := s.authTokens != "" || s.authHMACKeyFile != "" || (s.tlsCert != "" && s.tlsKey != "")
	if sc.roles != nil && !authenticates {
		add(usagef("-auth-require needs a way to authenticate: -auth-tokens, -auth-hmac-key or -tls-client-ca"))
	}
	if namesRoles(sc.topicRules) && !authenticates {
		add(usagef("-auth-topics names roles, which need a way to authenticate: -auth-tokens, -auth-hmac-key or -tls-client-ca (role * needs none)"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return sc, nil
}

// checkListenAddr refuses an address flag -name's value addr cannot be
// listened on whatever the host: no port, a port that is no number or
// service name, or (when unixOK) an empty unix:// path. A host name that
// does not resolve, or an address taken, is found when listening.
func checkListenAddr(name, addr string, unixOK bool) error {
	if unixOK {
		if path, ok := strings.CutPrefix(addr, "unix://"); ok {
			if path == "" {
				return usagef("-%s is %q, want unix:///path", name, addr)
			}
			return nil
		}
		addr = strings.TrimPrefix(addr, "tcp://")
	}
	want := "host:port (port 0 picks one)"
	if unixOK {
		want += " or unix:///path"
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("-%s is %q, want %s", name, addr, want)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return usagef("-%s is %q: port %q is no number from 0 to 65535, want %s", name, addr, port, want)
	}
	return nil
}

// fileError makes err, from reading the files that some flags name
// (files, by flag name), a usage error naming the flags: those whose file
// its message names, else all that name one. A usage error, or nil, is
// returned as it is.
func fileError(err error, files map[string]string) error {
	if err == nil || usageMessages(err) != nil {
		return err
	}
	msg := strings.TrimPrefix(err.Error(), "rpcd: ")
	var named, given []string
	for name, path := range files {
		if path == "" {
			continue
		}
		given = append(given, "-"+name)
		if strings.Contains(msg, path) {
			named = append(named, "-"+name)
		}
	}
	if len(named) == 0 {
		named = given
	}
	sort.Strings(named)
	return usagef("%s: %s", strings.Join(named, ", "), msg)
}

// sameSignal is how soon after the signal that began a drain another
// counts as the same request, not a second one that cuts the drain short.
const sameSignal = 500 * time.Millisecond

// newLogger returns a logger writing to w at level ("debug", "info", "warn"
// or "error") in format ("text" or "json").
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	switch level {
	case "debug":
		lv = slog.LevelDebug
	case "info":
		lv = slog.LevelInfo
	case "warn":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		return nil, usagef("-log-level is %q, want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usagef("-log-format is %q, want text or json", format)
}

// defaultLoops is the number of event loops serve runs when -loops is 0:
// one per P, for a process that serves rpcd alone, or with the HTTP gateway
// the reactor's default, which leaves a P to the rest. An event loop
// waiting in epoll_wait keeps its P (reactor.Options.Loops): with a loop on
// every P, the gateway's connections, which wait in Go's own network poller,
// were served when sysmon polled it, every 10 ms: under RPC load its calls
// took 7.2 ms at p90, against 0.41 ms with a P left to them, and it served
// a thirteenth of the requests (docs/performance.md, "Event loops and Ps").
func defaultLoops(gateway bool) int {
	if gateway {
		return reactor.DefaultLoops()
	}
	return runtime.GOMAXPROCS(0)
}

// parseRateLimits parses -rate-limit: "ROUTE=RATE[:BURST],...", ROUTE a
// route or * (ratelimit.Any); nil for an empty list.
func parseRateLimits(list string) (map[string]ratelimit.Limit, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	limits := map[string]ratelimit.Limit{}
	for _, item := range strings.Split(list, ",") {
		route, spec, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return nil, usagef("-rate-limit has %q, want ROUTE=RATE[:BURST]", item)
		}
		if route != ratelimit.Any && handler.ValidRoute(route) != nil {
			return nil, usagef("-rate-limit has the route %q, want Controller/Action or *", route)
		}
		if _, dup := limits[route]; dup {
			return nil, usagef("-rate-limit has the route %s twice", route)
		}
		rateText, burstText, hasBurst := strings.Cut(spec, ":")
		var l ratelimit.Limit
		var err error
		if l.Rate, err = strconv.ParseFloat(rateText, 64); err != nil || !(l.Rate > 0) || math.IsInf(l.Rate, 0) {
			return nil, usagef("-rate-limit %s: rate %q, want calls a second above 0", route, rateText)
		}
		if hasBurst {
			if l.Burst, err = strconv.Atoi(burstText); err != nil || l.Burst < 1 {
				return nil, usagef("-rate-limit %s: burst %q, want 1 or more", route, burstText)
			}
		}
		limits[route] = l
	}
	return limits, nil
}
