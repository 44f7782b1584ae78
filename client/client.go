package client

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/internal/engine"
	"github.com/rpcd/rpcd/proto"
)

// Client calls one rpcd server over Options.Conns connections. It is safe
// for concurrent use by many goroutines.
type Client struct {
	// What every call reads first (pick), together: a load generator of
	// 10,000 clients pays a cache miss a call for each line it touches.
	closed atomic.Bool
	next   atomic.Uint32
	first  slot // slots[0], in the client itself
	slots  []*slot
	idle   *idleWires  // connections no call waits on, with Conns > 1 (read.go)
	icpt   Interceptor // Options.Interceptors as one; nil for none (intercept.go)

	opts Options
	addr string
	log  *slog.Logger

	noConn    error         // a call's error when no connection is usable
	readyMu   sync.Mutex    // guards ready
	ready     chan struct{} // closed, and replaced, when a slot gets a new connection or fails to replace one that went away
	replacing atomic.Int32  // slots dialling the successor of a connection the server sent away (keep)
	retries   atomic.Uint64 // calls sent again, for tests
	srv       *serving      // the routes the server may call here
	dropped   atomic.Uint64 // pushes Options.Pushes had no room for
	subs      subTable      // publish/subscribe: the live subscriptions
	watch     *lingerWatch  // gives unused read tokens back to listeners (read.go)
	sweep     *timeoutSweep // ends calls' Options.Timeout deadlines (timeout.go)
	alive     *aliveWatch   // watches its connections for silence (alive.go); nil without Options.KeepAlive
	ctxs      ctxWatches    // contexts callers share, watched once (ctxwatch.go)

	pubs publishRefusals // publish/subscribe: the server's refusals of publishes

	ctx    context.Context // ends on Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// slot is one connection position: the live wire, and the goroutine that
// redials when it breaks.
type slot struct {
	w atomic.Pointer[wire]
}

// Dial connects to the server at addr ("host:port" or "unix:///path") with
// Options.Conns connections. It returns an error if any of them cannot be
// made; after that, broken connections are redialled in the background.
func Dial(ctx context.Context, addr string, opts Options) (*Client, error) {
	opts = opts.withDefaults()
	if err := checkCodec(opts.Codec); err != nil {
		return nil, err
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.TLS != nil {
		opts.TLS = tlsConfigFor(opts.TLS, addr)
	}
	c := &Client{addr: addr, opts: opts, log: opts.Logger, noConn: errNoConn(addr), ready: make(chan struct{}), icpt: chain(opts.Interceptors)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.pubs.fn = opts.PublishRefused
	c.srv = &serving{reg: opts.Handler, pushes: opts.Pushes, max: opts.MaxHandlers, peer: c, dropped: func() { c.dropped.Add(1) }, subs: &c.subs, pubs: &c.pubs,
		run: transport.Runner{MaxFrame: opts.Limits.MaxFrameSize, Logger: opts.Logger}}
	c.srv.streams = streamConfig(&opts, c.srv)
	if opts.Conns > 1 {
		c.idle = &idleWires{max: opts.Conns}
	}
	c.watch = newLingerWatch()
	c.sweep = newTimeoutSweep()
	c.ctxs.ended = c.ctxEnded
	for range opts.Conns {
		w, err := c.dial(ctx)
		if err != nil {
			c.Close()
			return nil, err
		}
		s := &c.first
		if len(c.slots) > 0 {
			s = &slot{}
		}
		s.w.Store(w)
		c.slots = append(c.slots, s)
	}
	for _, s := range c.slots {
		c.wg.Add(1)
		go c.keep(s)
	}
	c.watchAlive() // alive.go
	return c, nil
}

func (c *Client) dial(ctx context.Context) (*wire, error) {
	nc, zip, err := dialConn(ctx, c.addr, &c.opts)
	if err != nil {
		return nil, err
	}
	return newWire(nc, &c.opts, zip, c.srv, c.idle, c.watch), nil
}

// dialConn opens a connection under o, with its defaults set: dial, TLS,
// probe and handshake, within o.DialTimeout.
func dialConn(ctx context.Context, addr string, o *Options) (net.Conn, proto.Compression, error) {
	ctx, cancel := context.WithTimeout(ctx, o.DialTimeout)
	defer cancel()
	zip := proto.CompressionNone
	nc, err := o.Dial(ctx, addr)
	if err != nil {
		msg := err.Error()
		if _, ok := err.(*net.OpError); !ok { // an OpError names the address itself
			msg = "dial " + addr + ": " + msg
		}
		return nil, zip, &handler.Error{Code: proto.CodeUnavailable, Message: msg, Unprocessed: true}
	}
	if o.TLS != nil {
		tc := tls.Client(nc, o.TLS)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, zip, &handler.Error{Code: proto.CodeUnavailable, Message: "tls handshake with " + addr + ": " + err.Error(), Unprocessed: true}
		}
		nc = tc
	}
	if o.ProbeTimeout > 0 {
		if err := probe(ctx, nc, addr, o.ProbeTimeout, &o.Limits); err != nil {
			nc.Close()
			return nil, zip, err
		}
	}
	if takes := o.takes(); o.Credentials != nil || takes != nil {
		theirs, err := handshake(ctx, nc, o.Credentials, takes, &o.Limits)
		if err != nil {
			nc.Close()
			return nil, zip, err
		}
		if slices.Contains(theirs, o.Compression) {
			zip = o.Compression
		}
	}
	return nc, zip, nil
}

// tlsConfigFor returns cfg with ServerName set to the host of addr if
// it has none.
func tlsConfigFor(cfg *tls.Config, addr string) *tls.Config {
	if cfg.ServerName != "" || strings.HasPrefix(addr, "unix://") {
		return cfg
	}
	host, _, err := net.SplitHostPort(strings.TrimPrefix(addr, "tcp://"))
	if err != nil {
		return cfg
	}
	cfg = cfg.Clone()
	cfg.ServerName = host
	return cfg
}

// handshake sends the Hello on a new connection, with the credentials cr
// (if any) and the compressions the client takes, and waits for the
// server's Welcome (docs/protocol.md, "The handshake"); it returns the
// compressions the Welcome names. A refusal comes back as the server's
// GoAway: an Unauthenticated error.
func handshake(ctx context.Context, nc net.Conn, cr *Credentials, takes []proto.Compression, lim *proto.Limits) ([]proto.Compression, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
		defer nc.SetDeadline(time.Time{})
	}
	failed := func(err error) ([]proto.Compression, error) {
		return nil, &handler.Error{Code: proto.CodeUnavailable, Message: "handshake: " + handler.MessageOf(err), Unprocessed: true}
	}
	var method string
	var secret []byte
	if cr != nil {
		method, secret = cr.Method, cr.Secret
	}
	if _, err := nc.Write(proto.AppendHello(nil, method, secret, takes...)); err != nil {
		return failed(err)
	}
	// Exactly one frame, read without a buffer, so that nothing after it is
	// taken from the connection before its reader starts.
	var hdr [proto.HeaderSize]byte
	if _, err := io.ReadFull(nc, hdr[:]); err != nil {
		return failed(err)
	}
	h, err := proto.DecodeHeader(hdr[:], lim)
	if err != nil {
		return failed(err)
	}
	frame := make([]byte, h.Len())
	copy(frame, hdr[:])
	if _, err := io.ReadFull(nc, frame[proto.HeaderSize:]); err != nil {
		return failed(err)
	}
	f, _, err := proto.Decode(frame, lim)
	switch {
	case err != nil:
		return failed(err)
	case f.Kind == proto.KindWelcome:
		theirs, _ := f.Metadata.Get(proto.MetaCompression)
		return proto.ParseCompressionList(theirs), nil
	case f.Kind == proto.KindGoAway:
		_, code, msg := f.GoAwayBody()
		return nil, &handler.Error{Code: code, Message: "handshake refused: " + string(msg), Unprocessed: true}
	}
	return failed(errors.New("the server answered a Hello with " + f.Kind.String()))
}

// keep redials s's connection whenever it breaks or the server sends it a
// GoAway, until Close, after a backoff. The successor of a connection the
// server sent away after serving it (wire.movedOn: a drain, its maximum
// age) is dialled after the first backoff, however short the connection's
// life, and calls that find no connection meanwhile wait for it
// (awaitSuccessor). (Not at once: a draining server's connections send
// their GoAway as they wake, a moment before it closes its listener, and
// a connection dialled in that moment is reset.)
func (c *Client) keep(s *slot) {
	defer c.wg.Done()
	for attempt := 0; ; {
		w := s.w.Load()
		moved := false
		if w != nil {
			select {
			case <-w.done:
			case <-w.away: // new calls go to a successor while w drains
			case <-c.ctx.Done():
				w.close(ErrClosed)
				return
			}
			// A connection that lived a while, or was sent away after
			// serving, resets the backoff; one cut at once (a draining
			// server turns new ones away) keeps it growing.
			if moved = w.movedOn(); moved || time.Since(w.born) > time.Second {
				attempt = 0
			}
			if moved {
				c.replacing.Add(1) // before w leaves its slot: a call that finds it gone waits
			}
			s.w.Store(nil)
			c.retire(w)
		}
		select {
		case <-time.After(c.backoff(attempt)):
		case <-c.ctx.Done():
			if moved {
				c.replacing.Add(-1)
			}
			return
		}
		attempt++
		w, err := c.dial(c.ctx)
		if err != nil {
			c.log.Debug("rpcd: reconnecting", "addr", c.addr, "attempt", attempt, "err", err)
			if moved {
				c.replacing.Add(-1)
				c.wakeWaiting() // the calls waiting for this successor go on without it
			}
			continue
		}
		s.w.Store(w)
		if moved {
			c.replacing.Add(-1)
		}
		if c.closed.Load() { // Close ran between the check and the store
			w.close(ErrClosed)
			c.wakeWaiting()
			return
		}
		if s == c.slots[0] {
			c.resubscribe(w) // subscriptions ride the first connection
		}
		c.wakeWaiting()
	}
}

// wakeWaiting wakes the calls waiting for a connection (WaitForReady,
// awaitSuccessor): a slot has a new one, or gave up dialling the successor
// they waited for.
func (c *Client) wakeWaiting() {
	c.readyMu.Lock()
	close(c.ready)
	c.ready = make(chan struct{})
	c.readyMu.Unlock()
}

// retire closes w, which left its slot, once it fails (a connection that
// got a GoAway fails when its last call is answered) or at Close.
func (c *Client) retire(w *wire) {
	select {
	case <-w.done:
		w.close(nil)
		return
	default:
	}
	c.wg.Add(1) // keep holds a count: this Add cannot race Close's Wait
	go func() {
		defer c.wg.Done()
		select {
		case <-w.done:
			w.close(nil)
		case <-c.ctx.Done():
			w.close(ErrClosed)
		}
	}()
}

// backoff returns the wait before reconnection attempt n: the minimum
// doubled n times, capped, with full jitter over its upper half.
func (c *Client) backoff(n int) time.Duration {
	d := c.opts.MinBackoff << min(n, 30)
	if d > c.opts.MaxBackoff || d <= 0 {
		d = c.opts.MaxBackoff
	}
	return d/2 + rand.N(d/2+1)
}

// pick returns a live wire: an idle one if there is one (no call waits on
// it: read.go), else trying each connection once from the next in turn.
func (c *Client) pick() (*wire, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if c.idle != nil {
		if w := c.idle.get(); w != nil {
			return w, nil
		}
	}
	if len(c.slots) == 1 { // no round robin: no counter that every caller writes
		if w := c.first.w.Load(); w != nil && w.usable() {
			return w, nil
		}
		return nil, c.noConn
	}
	n := uint32(len(c.slots))
	start := c.next.Add(1)
	for i := range n {
		if w := c.slots[(start+i)%n].w.Load(); w != nil && w.usable() {
			return w, nil
		}
	}
	return nil, c.noConn
}

// Close closes every connection. Calls still waiting fail with ErrClosed.
func (c *Client) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	c.cancel()
	c.unwatchAlive()
	c.wg.Wait()
	c.endSubscriptions(ErrClosed)
	for _, s := range c.slots {
		if w := s.w.Load(); w != nil {
			w.close(ErrClosed)
		}
	}
	c.watch.stop()
	c.sweep.stop()
	c.ctxs.stop()
	return nil
}

// Call calls route with in encoded as JSON (or Options.Codec) and decodes
// the reply into out, a pointer (or nil to drop the reply). in may be nil
// for no argument. A call that fails is sent again when Options.MaxRetries
// allows it; the error returned is the last attempt's.
func (c *Client) Call(ctx context.Context, route string, in, out any) error {
	return transport.Received(callTyped(ctx, c, route, in, out))
}

// CallRaw calls route with req as a raw payload and appends the reply to
// reply, returning the extended slice. With a reply buffer of enough
// capacity, a call allocates nothing. It is retried as Call is.
func (c *Client) CallRaw(ctx context.Context, route string, req, reply []byte) ([]byte, error) {
	reply, err := callRaw(ctx, c, proto.CodecRaw, route, req, reply)
	return reply, transport.Received(err)
}

// Notify sends a one-way call to route with in encoded as JSON (or
// Options.Codec). It returns once the call is queued for writing; no
// reply, and no error from the server, ever comes back. It is never sent
// twice: with no usable connection it fails with Unavailable, or, under
// Options.WaitForReady, waits for one first.
func (c *Client) Notify(ctx context.Context, route string, in any) error {
	return transport.Received(notifyTyped(ctx, c, route, in))
}

// NotifyRaw sends a one-way call with a raw payload; see Notify.
func (c *Client) NotifyRaw(ctx context.Context, route string, req []byte) error {
	return transport.Received(notifyRaw(ctx, c, proto.CodecRaw, route, req))
}

// sender is what a Client and a Cluster send calls through: do sends a
// request and waits for its reply in cl.reply, goCall starts one that
// completes a Future, notify sends a one-way call; codec is
// Options.Codec, and resends reports whether a call may be sent more than
// once.
type sender interface {
	do(ctx context.Context, codec proto.Codec, route string, payload []byte, cl *call) error
	goCall(ctx context.Context, codec proto.Codec, route string, payload []byte, f *Future)
	notify(ctx context.Context, codec proto.Codec, route string, payload []byte) error
	codec() handler.Codec
	resends() bool
	interceptor() Interceptor // Options.Interceptors as one; nil for none
}

func (c *Client) codec() handler.Codec     { return c.opts.Codec }
func (c *Client) interceptor() Interceptor { return c.icpt }

// callTyped is Call for either sender.
func callTyped(ctx context.Context, s sender, route string, in, out any) error {
	if err := transport.RefuseWait(ctx, "calling", route); err != nil {
		return err
	}
	codec := s.codec()
	if s.interceptor() != nil {
		payload, err := transport.AppendArgWith(codec, nil, in)
		if err != nil {
			return err
		}
		reply, err := sendVia(ctx, s, codec.ID(), route, payload, nil)
		if err != nil {
			return err
		}
		return transport.DecodeReplyWith(codec, route, reply, out)
	}
	cl := getCall()
	defer putCall(cl)
	payload, err := transport.AppendArgWith(codec, cl.buf[:0], in)
	if err != nil {
		return err
	}
	cl.buf = payload
	// The reply may reuse the buffer: the payload is copied into the write
	// queue before the request can be sent, so before any reply arrives.
	cl.reply = cl.buf[:0]
	err = s.do(ctx, codec.ID(), route, payload, cl)
	cl.buf = cl.reply
	if err != nil {
		return err
	}
	return transport.DecodeReplyWith(codec, route, cl.reply, out)
}

// callRaw is CallRaw for either sender, the request labelled codec.
func callRaw(ctx context.Context, s sender, codec proto.Codec, route string, req, reply []byte) ([]byte, error) {
	if err := transport.RefuseWait(ctx, "calling", route); err != nil {
		return reply, err
	}
	if s.interceptor() != nil {
		return sendVia(ctx, s, codec, route, req, reply)
	}
	cl := getCall()
	defer putCall(cl)
	cl.reply = reply
	if err := s.do(ctx, codec, route, req, cl); err != nil {
		return reply, err
	}
	return cl.reply, nil
}

// notifyTyped is Notify for either sender.
func notifyTyped(ctx context.Context, s sender, route string, in any) error {
	cl := getCall()
	defer putCall(cl)
	codec := s.codec()
	payload, err := transport.AppendArgWith(codec, cl.buf[:0], in)
	if err != nil {
		return err
	}
	cl.buf = payload
	if s.interceptor() != nil {
		return notifyVia(ctx, s, codec.ID(), route, payload)
	}
	return s.notify(ctx, codec.ID(), route, payload)
}

// notifyRaw is NotifyRaw for either sender, the payload labelled codec.
func notifyRaw(ctx context.Context, s sender, codec proto.Codec, route string, req []byte) error {
	if s.interceptor() != nil {
		return notifyVia(ctx, s, codec, route, req)
	}
	return s.notify(ctx, codec, route, req)
}

func (c *Client) notify(ctx context.Context, codec proto.Codec, route string, payload []byte) error {
	h, md, err := engine.Header(ctx, proto.KindOneWay, codec, route, payload, &c.opts.Limits)
	if err != nil {
		return err
	}
	w, err := c.pick()
	if err == c.noConn && c.opts.WaitForReady {
		if werr := transport.RefuseWait(ctx, "waiting for a connection to notify", route); werr != nil {
			return werr
		}
		w, err = c.awaitConn(ctx, route, err)
	}
	if err != nil {
		return err
	}
	h.ID = w.newID()
	dl, _ := ctx.Deadline()
	return w.enqueueRequest(h, route, md, payload, dl)
}

// start registers cl on a usable connection and queues its request, whose
// header is h; the reply will land in cl.reply.
func (c *Client) start(ctx context.Context, h proto.Header, route string, md proto.Metadata, payload []byte, cl *call) (*wire, error) {
	w, err := c.pick()
	if err != nil {
		return nil, err
	}
	if h.ID, err = w.register(cl); err != nil {
		return nil, err
	}
	dl, _ := ctx.Deadline()
	if err := w.enqueueRequest(h, route, md, payload, dl); err != nil {
		if w.forget(cl) {
			return nil, err
		}
		// The wire failed after taking the call and completes it.
	}
	return w, nil
}

// do sends a request and waits for its reply in cl.reply, sending it again
// when it fails in a way the retry rules allow.
func (c *Client) do(ctx context.Context, codec proto.Codec, route string, payload []byte, cl *call) error {
	ctx, b := c.sweep.bound(ctx, c.opts.Timeout) // Options.Timeout (timeout.go)
	defer b.release()
	h, md, err := engine.Header(ctx, proto.KindRequest, codec, route, payload, &c.opts.Limits)
	if err != nil {
		return err
	}
	if err = c.once(ctx, h, route, md, payload, cl); err != nil {
		err = c.retry(ctx, h, route, md, payload, cl, err)
	}
	return err
}

// once sends a request once and waits for its reply in cl.reply.
func (c *Client) once(ctx context.Context, h proto.Header, route string, md proto.Metadata, payload []byte, cl *call) error {
	cl.route, cl.watch = route, c.ctxs.watchFor(ctx) // before cl enters a table (ctxwatch.go)
	w, err := c.start(ctx, h, route, md, payload, cl)
	if err != nil {
		return err
	}
	if w.tryLead() {
		if ok, err := w.lead(ctx, cl, route); ok { // read.go
			return err
		}
	}
	done := ctx.Done()
	if done == nil || cl.watch != nil && ctx.Err() == nil {
		// A context that never ends, or one whose end the watch, which
		// has cl now, will tell cl: no select needed.
		<-cl.done
		return cl.err
	}
	select {
	case <-cl.done:
		return cl.err
	case <-done:
	}
	if !w.forget(cl) {
		<-cl.done // a reply is being delivered; take it
		return cl.err
	}
	w.abandon(cl.id)
	return engine.ContextError(ctx.Err(), route)
}
