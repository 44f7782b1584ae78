package reactor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// Server serves a registry's routes on gnet event loops.
type Server struct {
	gnet.BuiltinEventEngine

	reg  *handler.Registry
	opts Options
	log  *slog.Logger

	started  atomic.Bool
	booted   chan struct{} // closed once listening, or when start-up failed
	stopped  chan struct{} // closed when ListenAndServe returns
	eng      gnet.Engine
	addr     net.Addr
	bootErr  error // why the server could not finish starting
	draining atomic.Bool

	mu    sync.Mutex
	conns map[*conn]struct{}

	tasks    chan *task
	workers  sync.WaitGroup
	inflight atomic.Int64 // blocking calls queued or running
}

// New returns a server for reg's routes. Call ListenAndServe or Start.
func New(reg *handler.Registry, opts Options) *Server {
	opts = opts.withDefaults()
	return &Server{
		reg:     reg,
		opts:    opts,
		log:     opts.Logger,
		booted:  make(chan struct{}),
		stopped: make(chan struct{}),
		conns:   make(map[*conn]struct{}),
	}
}

// ListenAndServe listens on addr ("host:port", or "unix:///path") and serves
// until Shutdown, after which it returns ErrServerClosed. It returns other
// errors if it cannot listen.
func (s *Server) ListenAndServe(addr string) error {
	if !s.started.CompareAndSwap(false, true) {
		return errAlreadyStarted
	}
	return s.serve(addr)
}

func (s *Server) serve(addr string) error {
	defer close(s.stopped)
	s.tasks = make(chan *task, s.opts.BlockingQueue)
	for range s.opts.BlockingWorkers {
		s.workers.Add(1)
		go s.worker()
	}
	// Workers end once the queue is drained; Shutdown waits for them.
	defer close(s.tasks)
	if !strings.Contains(addr, "://") {
		addr = "tcp://" + addr
	}
	err := gnet.Run(s, addr,
		gnet.WithNumEventLoop(s.opts.Loops),
		gnet.WithReusePort(false),
		gnet.WithReuseAddr(true), // a restarted server rebinds despite TIME_WAIT
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithLogger(gnetLogger{s.log}),
	)
	select {
	case <-s.booted:
	default:
		close(s.booted) // gnet failed before OnBoot
	}
	switch {
	case s.bootErr != nil:
		return s.bootErr
	case err == nil && s.draining.Load():
		return ErrServerClosed
	}
	return err
}

// Start runs ListenAndServe in the background and returns once the server
// is listening, or with the error that kept it from listening.
func (s *Server) Start(addr string) error {
	if !s.started.CompareAndSwap(false, true) {
		return errAlreadyStarted
	}
	errc := make(chan error, 1)
	go func() { errc <- s.serve(addr) }()
	select {
	case <-s.booted:
		if s.addr != nil {
			return nil
		}
		return <-errc // gnet failed, or OnBoot stopped it
	case err := <-errc:
		return err
	}
}

// Addr returns the address the server listens on, once it does; nil before.
func (s *Server) Addr() net.Addr {
	select {
	case <-s.booted:
		return s.addr
	default:
		return nil
	}
}

// OnBoot records the engine and the bound address; if the address cannot
// be read, it stops the engine and ListenAndServe returns why.
func (s *Server) OnBoot(eng gnet.Engine) gnet.Action {
	defer close(s.booted)
	s.eng = eng
	addr, err := listenerAddr(eng)
	if err != nil {
		s.bootErr = fmt.Errorf("rpcd: reading the listener's address: %w", err)
		return gnet.Shutdown
	}
	s.addr = addr
	return gnet.None
}

// listenerAddr asks the kernel which address the listener is bound to, so
// that ":0" reports the port it got.
func listenerAddr(eng gnet.Engine) (net.Addr, error) {
	fd, err := eng.Dup()
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "listener")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	return ln.Addr(), nil
}

// OnOpen sets up a connection, or turns it away while draining.
func (s *Server) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	if s.draining.Load() {
		return proto.AppendGoAway(nil, 0, proto.CodeUnavailable, "server is draining"), gnet.Close
	}
	c := newConn(s, gc, gc.RemoteAddr())
	gc.SetContext(c)
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	return nil, gnet.None
}

// OnClose cancels what the connection had in flight.
func (s *Server) OnClose(gc gnet.Conn, err error) gnet.Action {
	c, ok := gc.Context().(*conn)
	if !ok {
		return gnet.None
	}
	c.closeCalls()
	if c.big != nil {
		c.releaseBig()
	}
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	if err != nil && !errors.Is(err, os.ErrClosed) {
		s.log.Debug("rpcd: connection closed", "remote", c.remote, "err", err)
	}
	return gnet.None
}

// outPool holds the buffers that collect one wake-up's replies.
var outPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// OnTraffic runs every whole frame the connection has buffered and writes
// all their replies with one call.
func (s *Server) OnTraffic(gc gnet.Conn) gnet.Action {
	c := gc.Context().(*conn)
	bp := outPool.Get().(*[]byte)
	out := (*bp)[:0]
	if s.draining.Load() && !c.goingAway {
		out = c.goAway(out)
	}
	out = c.takeReplies(out)

	out, action := c.readFrames(gc, out)
	if len(out) > 0 {
		if _, err := gc.Write(out); err != nil {
			action = gnet.Close
		}
	}
	if cap(out) <= 2*s.opts.Limits.MaxFrameSize { // let a huger buffer go
		*bp = out[:0]
		outPool.Put(bp)
	}
	return action
}

// bigFrame is the size from which a frame that is still arriving is
// gathered into a buffer of its own, taken from gnet's input as it comes,
// rather than left in gnet's ring buffer, which would copy it on every
// read and once more to make it contiguous.
const bigFrame = 64 << 10

// readFrames runs every whole frame buffered on gc and appends the replies
// to out. It looks at the first frame's header alone until that frame is
// whole, so a large frame arriving in pieces is not copied over and over;
// then it takes everything buffered in one Peek (a view into gnet's buffer
// when nothing was left over from an earlier wake-up), runs the whole
// frames in it, and discards them at once. A frame that breaks the
// protocol ends the connection with a GoAway saying why.
func (c *conn) readFrames(gc gnet.Conn, out []byte) ([]byte, gnet.Action) {
	if c.big != nil {
		whole, err := false, error(nil)
		if out, whole, err = c.gatherBig(gc, out); err != nil {
			return c.protocolError(out, err)
		} else if !whole {
			return out, gnet.None
		}
	}
	lim := &c.s.opts.Limits
	b, err := gc.Peek(proto.HeaderSize)
	if err != nil {
		return out, gnet.None // not a whole header yet
	}
	h, err := proto.DecodeHeader(b, lim)
	if err == nil && gc.InboundBuffered() < h.Len() {
		if h.Len() >= bigFrame {
			c.startBig(h)
			out, _, err = c.gatherBig(gc, out) // not whole: fewer bytes are buffered
		}
		if err == nil {
			return out, gnet.None // the header is good; wait for the rest
		}
	}
	var buf []byte
	if err == nil {
		buf, _ = gc.Peek(-1)
	}
	var now time.Time
	var f proto.Frame
	done := 0
	for err == nil { // h holds the header at buf[done:], accepted
		n := h.Len()
		if len(buf)-done < n {
			break
		}
		f.Header = h
		if err = proto.DecodeFrame(&f, buf[done:]); err != nil {
			break
		}
		if f.Deadline > 0 && now.IsZero() {
			now = time.Now()
		}
		out = c.handleFrame(&f, out, now)
		done += n
		if len(buf)-done < proto.HeaderSize {
			break
		}
		h, err = proto.DecodeHeader(buf[done:], lim)
	}
	if done > 0 {
		_, _ = gc.Discard(done) // the frames' views end here
	}
	if err != nil {
		return c.protocolError(out, err)
	}
	return out, gnet.None
}

// protocolError ends the connection on bytes that break the protocol: a
// GoAway saying why, after the replies already made.
func (c *conn) protocolError(out []byte, err error) ([]byte, gnet.Action) {
	c.s.log.Info("rpcd: closing connection on a protocol error", "remote", c.remote, "err", err)
	return proto.AppendGoAway(out, c.lastID, proto.CodeInternal, err.Error()), gnet.Close
}

// bigBufs holds the buffers large frames are gathered in.
var bigBufs sync.Pool

// startBig makes room for a large frame whose accepted header is h. The
// whole frame's room is taken at once, so its bytes are copied once.
func (c *conn) startBig(h proto.Header) {
	n := h.Len()
	if p, ok := bigBufs.Get().(*[]byte); ok && cap(*p) >= n {
		c.big = (*p)[:0]
	} else {
		c.big = make([]byte, 0, n)
	}
	c.bigHeader = h
}

// gatherBig moves what gc has buffered of the large frame being gathered
// into its buffer; once the frame is whole, it runs it, appending the reply
// to out, and reports true.
func (c *conn) gatherBig(gc gnet.Conn, out []byte) ([]byte, bool, error) {
	n := c.bigHeader.Len()
	avail, _ := gc.Peek(-1)
	k := min(len(avail), n-len(c.big))
	c.big = append(c.big, avail[:k]...)
	_, _ = gc.Discard(k)
	if len(c.big) < n {
		return out, false, nil
	}
	defer c.releaseBig()
	f := proto.Frame{Header: c.bigHeader}
	if err := proto.DecodeFrame(&f, c.big); err != nil {
		return out, false, err
	}
	var now time.Time
	if f.Deadline > 0 {
		now = time.Now()
	}
	return c.handleFrame(&f, out, now), true, nil
}

// releaseBig returns the large frame's buffer to the pool.
func (c *conn) releaseBig() {
	b := c.big[:0]
	c.big = nil
	if cap(b) <= c.s.opts.Limits.MaxFrameSize {
		bigBufs.Put(&b)
	}
}

// Shutdown stops the server gracefully: it turns new connections away, sends
// GoAway on every connection, waits for the calls in flight to be answered
// and written, then stops the event loops and the blocking pool. If ctx ends
// first, Shutdown cancels the calls still running, stops the event loops
// anyway and returns ctx's error; a Blocking handler that ignores its
// cancelled context keeps its worker until it returns.
func (s *Server) Shutdown(ctx context.Context) error {
	if !s.started.Load() || !s.draining.CompareAndSwap(false, true) {
		return nil
	}
	<-s.booted
	if s.addr == nil {
		return nil // never listened
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
	// gnet's Stop polls for the engine's end every 500ms; ListenAndServe
	// returning is the end, so stop waiting then.
	stopCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.stopped:
		case <-stopCtx.Done():
		}
		cancel()
	}()
	_ = s.eng.Stop(stopCtx)
	select {
	case <-s.stopped:
	case <-ctx.Done():
		if err == nil {
			err = ctx.Err()
		}
		return err
	}
	workersDone := make(chan struct{})
	go func() { s.workers.Wait(); close(workersDone) }()
	select {
	case <-workersDone:
	case <-ctx.Done():
		if err == nil {
			err = ctx.Err()
		}
	}
	return err
}

// awaitIdle waits until no blocking call is queued or running.
func (s *Server) awaitIdle(ctx context.Context) error {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for s.inflight.Load() > 0 {
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
func (s *Server) wakeAll(ctx context.Context) {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	var pending atomic.Int64
	pending.Add(int64(len(conns)))
	for _, c := range conns {
		err := c.gc.Wake(func(gnet.Conn, error) error { pending.Add(-1); return nil })
		if err != nil {
			pending.Add(-1)
		}
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
