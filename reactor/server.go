package reactor

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/internal/engine"
	"github.com/rpcd/rpcd/internal/linger"
	"github.com/rpcd/rpcd/proto"
)

// Server serves a registry's routes on gnet event loops: epoll on Linux,
// kqueue on macOS and FreeBSD. On Windows, and for TLS, it serves them on
// the standard library transport instead, a goroutine per connection
// (Options.StdTransport, Options.TLS).
//
// It accepts connections itself, on a net.Listener, and hands each to an
// event loop: so it can refuse connections past a maximum, back off when
// the process is out of file descriptors instead of stopping (as gnet's own
// acceptor would), and stop accepting at once on Shutdown.
type Server struct {
	ev events // what gnet's event loops call

	reg  *handler.Registry
	opts Options
	log  *slog.Logger
	run  transport.Runner // runs every call (handler/transport/run.go)

	streamCfg *engine.StreamConfig // what every connection's streams share (stream.go)

	started  atomic.Bool
	ready    chan struct{} // closed once serving, or when start-up failed
	startErr error         // why it could not start; read after ready
	invalid  error         // what Options.Validate found wrong, refused by Serve and Start
	drained  chan struct{} // closed by Shutdown once the loops are stopped
	accepted chan struct{} // closed when the accept loop has returned
	done     chan struct{} // closed when Serve returns
	ln       net.Listener
	loops    *gnet.Client // the event loops; gnet's client engine takes connections we accept
	draining atomic.Bool

	clock   atomic.Int64 // a coarse "now" in Unix nanoseconds, kept by the sweeper
	preAuth proto.Limits // the limits before a connection's handshake

	mu          sync.Mutex
	conns       map[*conn]struct{}
	loopWatches map[gnet.EventLoop]*loopWatch // each event loop's, from its first connection (watchdog.go)
	watches     map[*loopWatch]struct{}       // what the watchdog looks at: the loops' and the own of connections on goroutines
	nconns      atomic.Int64

	stdConns  sync.WaitGroup // the standard library transport's goroutines
	lingering atomic.Int64   // refused connections lingering (refuse)

	tasks    chan *task
	workers  sync.WaitGroup
	inflight atomic.Int64  // blocking calls queued or running
	streams  serverStreams // stream handlers running (stream.go)

	stats serverStats // the counters behind Stats

	subs   subIndex     // publish/subscribe: every connection's subscriptions
	nsubs  atomic.Int64 // how many
	pubsub pubsubStats

	refusals topicRefusals // publishes and subscriptions Options.Topics refused (topics.go)

	connSeq atomic.Uint64          // the last connection's number (conn.id)
	tap     atomic.Pointer[tapSet] // the tap that sees the frames (tap.go); nil for none
	tapMu   sync.Mutex             // one SetTap at a time
}

// New returns a server for reg's routes. Call ListenAndServe, Serve or
// Start, which refuse Options that Options.Validate refuses.
func New(reg *handler.Registry, opts Options) *Server {
	invalid := opts.Validate()
	opts = opts.withDefaults()
	pre := opts.Limits
	pre.MaxFrameSize = min(pre.MaxFrameSize, proto.HeaderSize+opts.PreAuthMaxFrame)
	s := &Server{
		preAuth:  pre,
		reg:      reg,
		opts:     opts,
		log:      opts.Logger,
		ready:    make(chan struct{}),
		drained:  make(chan struct{}),
		accepted: make(chan struct{}),
		done:     make(chan struct{}),
		conns:    make(map[*conn]struct{}),

		loopWatches: make(map[gnet.EventLoop]*loopWatch),
		watches:     make(map[*loopWatch]struct{}),
		refusals:    newTopicRefusals(),
		invalid:     invalid,
	}
	s.run = transport.Runner{MaxFrame: opts.Limits.MaxFrameSize, Logger: opts.Logger, Failed: s.stats.callFailed,
		Compress: s.compressReply, Budget: opts.InlineBudget}
	s.streamCfg = s.streamConfig()
	s.ev.Server = s
	return s
}

// Listen listens on addr: "host:port" or "tcp://host:port" for TCP,
// "unix:///path" for a Unix socket.
func Listen(addr string) (net.Listener, error) {
	network := "tcp"
	if rest, ok := strings.CutPrefix(addr, "unix://"); ok {
		network, addr = "unix", rest
	} else {
		addr = strings.TrimPrefix(addr, "tcp://")
	}
	return net.Listen(network, addr)
}

// ListenAndServe listens on addr (see Listen) and serves until Shutdown,
// after which it returns ErrServerClosed.
func (s *Server) ListenAndServe(addr string) error {
	ln, err := Listen(addr)
	if err != nil {
		return err
	}
	return s.Serve(ln)
}

// Serve serves connections accepted on ln until Shutdown, after which it
// returns ErrServerClosed, or until ln fails for good. It closes ln.
func (s *Server) Serve(ln net.Listener) error {
	if !s.started.CompareAndSwap(false, true) {
		ln.Close()
		return errAlreadyStarted
	}
	return s.serve(ln)
}

// Start listens on addr and serves in the background; it returns once the
// server is serving, or with the error that kept it from it.
func (s *Server) Start(addr string) error {
	ln, err := Listen(addr)
	if err != nil {
		return err
	}
	return s.StartOn(ln)
}

// StartOn serves connections accepted on ln in the background, as Start
// does on the listener it makes; it closes ln.
func (s *Server) StartOn(ln net.Listener) error {
	if !s.started.CompareAndSwap(false, true) {
		ln.Close()
		return errAlreadyStarted
	}
	errc := make(chan error, 1)
	go func() { errc <- s.serve(ln) }()
	<-s.ready
	if s.startErr != nil {
		return <-errc
	}
	return nil
}

// onLoops reports whether the server's own connections are served on
// gnet's event loops: neither TLS nor Options.StdTransport (always set on
// Windows) sends them to the standard library transport.
func (s *Server) onLoops() bool { return s.opts.TLS == nil && !s.opts.StdTransport }

// Transport names what serves the connections the server accepts:
// "epoll event loops" (Linux), "kqueue event loops" (macOS, FreeBSD and the
// other BSDs), or "goroutine per connection", the standard library
// transport (on Windows, with Options.TLS or with Options.StdTransport).
// Connections given to ServeConn are always served on the latter, as are
// those that leave their loop (a peer slow to read, a half-close).
func (s *Server) Transport() string {
	switch {
	case !s.onLoops():
		return "goroutine per connection"
	case runtime.GOOS == "linux" || runtime.GOOS == "android":
		return "epoll event loops"
	default:
		return "kqueue event loops"
	}
}

// Loops returns the number of event loops the server runs (Options.Loops
// or its default): 0 when the connections it accepts are served on the
// standard library transport.
func (s *Server) Loops() int {
	if !s.onLoops() {
		return 0
	}
	return s.opts.Loops
}

// Conns returns the number of connections open now.
func (s *Server) Conns() int { return int(s.nconns.Load()) }

// Addr returns the address the server listens on, once it does; nil before.
func (s *Server) Addr() net.Addr {
	select {
	case <-s.ready:
		if s.ln != nil && s.startErr == nil {
			return s.ln.Addr()
		}
	default:
	}
	return nil
}

func (s *Server) serve(ln net.Listener) error {
	defer close(s.done)
	if s.invalid != nil {
		s.startErr = s.invalid
		close(s.ready)
		ln.Close()
		return s.invalid
	}
	onLoops := s.onLoops()
	if onLoops && s.opts.Loops >= runtime.GOMAXPROCS(0) {
		// A loop on every P: accept beside busy loops (accept.go). With a P
		// to spare, Go's poller is polled, and an Accept waiting there
		// costs nothing, where each of poll(2)'s waits has sysmon tick.
		ln = newPollListener(ln)
	}
	s.ln = ln
	s.tasks = make(chan *task, s.opts.BlockingQueue)
	for range s.opts.BlockingWorkers {
		s.workers.Add(1)
		go s.worker()
	}
	defer close(s.tasks) // workers end once the queue is drained; Shutdown waits for them

	if onLoops { // else every connection goes to the standard library transport
		loops, err := gnet.NewClient(&s.ev,
			gnet.WithNumEventLoop(s.opts.Loops),
			gnet.WithTCPNoDelay(gnet.TCPNoDelay),
			gnet.WithLogger(gnetLogger{s.log}),
		)
		if err == nil {
			err = loops.Start()
		}
		if err != nil {
			s.startErr = err
			close(s.ready)
			ln.Close()
			return err
		}
		s.loops = loops
	}
	s.clock.Store(time.Now().UnixNano())
	stopSweep := make(chan struct{})
	var sweeping sync.WaitGroup
	sweeping.Add(1)
	go func() { defer sweeping.Done(); s.sweep(stopSweep) }()
	sweeping.Add(1)
	go func() { defer sweeping.Done(); s.watchdog(stopSweep) }() // watchdog.go
	defer func() { close(stopSweep); sweeping.Wait() }()
	close(s.ready)

	err := s.accept(ln)
	close(s.accepted)
	if !s.draining.Load() { // the listener failed on its own: stop everything
		s.stopConns()
		return err
	}
	<-s.drained
	return ErrServerClosed
}

// accept takes connections from ln and gives them to the event loops until
// ln is closed. It refuses connections past Options.MaxConns with a GoAway,
// and backs off when accepting fails, as it does when the process is out of
// file descriptors, instead of giving up.
func (s *Server) accept(ln net.Listener) error {
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err == nil && s.loops == nil { // the standard library transport; refused, if need be, by serveStd (once TLS can carry the GoAway)
			if s.opts.TLS != nil {
				nc = tls.Server(nc, s.opts.TLS)
			}
			s.stdConns.Add(1)
			go s.serveStd(nc)
			delay = 0
			continue
		}
		if err == nil && s.nconns.Load() >= int64(s.opts.MaxConns) {
			s.refuse(nc, proto.CodeResourceExhausted, "too many connections")
			continue
		}
		if err == nil {
			_, err = s.loops.EnrollContext(nc, nil) // closes nc; the loop has its own descriptor
		}
		if err == nil {
			delay = 0
			continue
		}
		if errors.Is(err, net.ErrClosed) {
			return err
		}
		delay = min(max(2*delay, 5*time.Millisecond), time.Second)
		s.log.Warn("rpcd: accepting a connection failed; backing off", "err", err, "delay", delay)
		select {
		case <-time.After(delay):
		case <-s.drained:
			return net.ErrClosed
		}
	}
}

// refuse tells a connection it will not be served and closes it, after a
// linger (linger.Drain, Options.RefuseLinger) on a goroutine of its own
// unless Options.MaxRefuseLinger of them linger already.
func (s *Server) refuse(nc net.Conn, code proto.Code, msg string) {
	s.stats.connsRefused.Add(1)
	s.log.Debug("rpcd: connection refused", "remote", nc.RemoteAddr(), "reason", msg)
	_ = nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := nc.Write(proto.AppendGoAway(nil, 0, code, msg)); err != nil || s.lingering.Add(1) > int64(s.opts.MaxRefuseLinger) {
		s.lingering.Add(-1)
		_ = nc.Close()
		return
	}
	go func() {
		defer s.lingering.Add(-1)
		linger.Drain(nc, s.opts.RefuseLinger, s.opts.LingerBytes)
		_ = nc.Close()
	}()
}

// Shutdown stops the server gracefully: it stops accepting, sends GoAway on
// every connection, waits for the calls in flight to be answered and
// written, then stops the event loops and the blocking pool. If ctx ends
// first, Shutdown cancels the calls still running, stops the event loops
// anyway and returns ctx's error; a Blocking handler that ignores its
// cancelled context keeps its worker until it returns.
func (s *Server) Shutdown(ctx context.Context) error {
	if !s.started.Load() || !s.draining.CompareAndSwap(false, true) {
		return nil
	}
	s.mu.Lock() // a ServeConn that saw no drain has counted its connection
	s.mu.Unlock()
	<-s.ready
	if s.startErr != nil {
		return nil // never served
	}
	s.ln.Close() // stop accepting
	select {     // and let a connection being handed to a loop get there first
	case <-s.accepted:
	case <-ctx.Done():
	}
	s.wakeAll(ctx) // each connection sends its GoAway

	err := s.awaitIdle(ctx)
	if err != nil {
		s.mu.Lock()
		for c := range s.conns {
			c.closeCalls()
		}
		s.mu.Unlock()
	} else {
		s.wakeAll(ctx) // write the last replies
	}
	s.stopConns()
	close(s.drained)
	for _, wait := range []<-chan struct{}{s.done, waitChan(&s.workers), s.streams.waitChan()} {
		select {
		case <-wait:
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return err
		}
	}
	return err
}

// stopConns stops the event loops, which close their connections, and
// closes the connections served by goroutines of their own, whose
// goroutines have written all they had.
func (s *Server) stopConns() {
	if s.loops != nil {
		_ = s.loops.Stop()
	}
	for _, c := range s.snapshot(nil) {
		if l := c.std.Load(); l != nil {
			l.stop()
		}
	}
	s.stdConns.Wait()
}

// waitChan returns a channel closed when wg is done.
func waitChan(wg *sync.WaitGroup) <-chan struct{} {
	c := make(chan struct{})
	go func() { wg.Wait(); close(c) }()
	return c
}

// awaitIdle waits until no blocking call is queued or running.
func (s *Server) awaitIdle(ctx context.Context) error {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for s.inflight.Load() > 0 || s.streams.running.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// wakeAll runs OnTraffic once on every connection, on its own loop, and
// waits until all have run or ctx ends.
func (s *Server) wakeAll(ctx context.Context) { s.wake(ctx, s.snapshot(nil)) }

// wake runs OnTraffic once on each of conns, on its own loop, and waits
// until all have run or ctx ends.
func (s *Server) wake(ctx context.Context, conns []*conn) {
	var pending atomic.Int64
	pending.Add(int64(len(conns)))
	for _, c := range conns {
		c.wakeThen(func() { pending.Add(-1) })
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for pending.Load() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// snapshot appends the open connections to buf.
func (s *Server) snapshot(buf []*conn) []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		buf = append(buf, c)
	}
	return buf
}
