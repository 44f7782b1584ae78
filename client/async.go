package client

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/internal/engine"
	"github.com/rpcd/rpcd/proto"
)

// Asynchronous calls (CallAsync, CallRawAsync): for a program that keeps
// many calls in flight from few goroutines, as rpcd's load generator does.
// A call's completion runs its done function on the goroutine that reads
// its reply, with no goroutine, channel or timer of the call's own: the
// reader reads a batch of replies, runs their done functions, and the calls
// they start go out together in one write at the batch's end
// (wire.beginBatch). Deadlines, cancellation, retries and errors are
// Call's:
//
//   - Deadline: ctx's, else Options.Timeout from the call's start. A call
//     whose context can end is watched with context.AfterFunc; the others'
//     deadlines are enforced by the process's sweep (asyncSweeps), one
//     goroutine for every client that looks every sweepEvery while such
//     calls wait, at most that late.
//   - Retries: a failed call that Call would send again is sent again, on a
//     goroutine of its own (a retry is rare; the common path has none).
//   - A call that fails before it is sent (a bad route, no connection,
//     the client closed) completes on the caller's goroutine, before
//     CallRawAsync returns.

// CallRawAsync starts a call like CallRaw and returns at once: done runs
// once the call has completed, with its reply appended to reply, or its
// error (as CallRaw would return it). done runs on the goroutine that
// reads the connection and must not block; calls it starts go out with
// the others its batch of replies starts, in one write. req is the call's
// until done runs (a call sent again sends it again), as it is CallRaw's
// until CallRaw returns: change it only after. With Options.Interceptors,
// which wait for the call, the call runs on a goroutine of its own.
func (c *Client) CallRawAsync(ctx context.Context, route string, req, reply []byte, done func(reply []byte, err error)) {
	c.callEncodedAsync(ctx, proto.CodecRaw, route, req, reply, done)
}

// callEncodedAsync is CallRawAsync with the request labelled codec.
func (c *Client) callEncodedAsync(ctx context.Context, codec proto.Codec, route string, req, reply []byte, done func(reply []byte, err error)) {
	if c.icpt != nil {
		go func() {
			reply, err := callRaw(ctx, c, codec, route, req, reply)
			done(reply, transport.Received(err))
		}()
		return
	}
	cl := getCall()
	cl.reply, cl.then = reply, done
	c.startAsync(ctx, codec, route, req, cl)
}

// CallAsync starts a call like Call and returns at once: done runs once the
// call has completed, with out decoded from its reply, or its error, as
// CallRawAsync's does.
func (c *Client) CallAsync(ctx context.Context, route string, in, out any, done func(err error)) {
	codec := c.opts.Codec
	if c.icpt != nil {
		go func() { done(c.Call(ctx, route, in, out)) }()
		return
	}
	cl := getCall()
	payload, err := transport.AppendArgWith(codec, cl.buf[:0], in)
	if err != nil {
		putCall(cl)
		done(err)
		return
	}
	// The reply may reuse the buffer: the payload is copied into the write
	// queue (or kept for a retry) before the request can be sent.
	cl.buf, cl.reply = payload, payload[:0]
	cl.typed = typedAsync{codec: codec, out: out, done: done}
	c.startAsync(ctx, codec.ID(), route, payload, cl)
}

// typedAsync is what completes a CallAsync: the reply decoded into out,
// then done.
type typedAsync struct {
	codec handler.Codec
	out   any
	done  func(error)
}

// startAsync sends the asynchronous call cl, its done function set.
func (c *Client) startAsync(ctx context.Context, codec proto.Codec, route string, payload []byte, cl *call) {
	cl.route = route
	h, md, err := c.header(ctx, proto.KindRequest, codec, route, payload)
	if err != nil {
		cl.complete(err)
		return
	}
	if _, ok := ctx.Deadline(); !ok && c.opts.Timeout > 0 {
		cl.deadline = time.Now().Add(c.opts.Timeout).UnixNano()
		h.Deadline = uint32((c.opts.Timeout + time.Millisecond - 1) / time.Millisecond)
	}
	if c.opts.resends() {
		cl.retry = asyncRetry{c: c, ctx: ctx, payload: payload, codec: codec}
	}
	if ctx.Done() != nil {
		// Watched from before it can complete, so that completing it always
		// stops the watch. A watch may run while its call completes: the
		// call is not pooled, so that the watch never meets another.
		cl.unpooled = true
		cl.stop = context.AfterFunc(ctx, func() {
			if w := cl.on.Load(); w != nil && w.forget(cl) {
				w.abandon(cl.id)
				cl.complete(engine.ContextError(ctx.Err(), route))
			}
		})
	}
	// Read before register: from then on a failing wire may complete cl,
	// and a pooled cl may then serve another call.
	watchDeadline, unpooled := cl.deadline != 0, cl.unpooled
	w, err := c.pick()
	if err == nil {
		h.ID, err = w.register(cl)
	}
	if err != nil {
		cl.finishAsync(err)
		return
	}
	if unpooled {
		cl.on.Store(w)
		if err := ctx.Err(); err != nil && w.forget(cl) { // ended before the watch could see w
			cl.complete(engine.ContextError(err, route))
			return
		}
	}
	if watchDeadline {
		c.async.watch(c)
	}
	w.enqueueCall(h, route, md, payload)
	w.needRead()
}

// Batch runs start, which starts asynchronous calls (CallAsync,
// CallRawAsync), and sends the calls it started on each connection in one
// write once it returns: calls started on other goroutines meanwhile join
// them. start must not wait for a call: one it waits for is not sent until
// it returns. Calls started from a done function need no Batch: they go
// out together at the end of their batch of replies.
func (c *Client) Batch(start func()) {
	for _, s := range c.slots {
		if w := s.w.Load(); w != nil {
			w.hold(+1)
		}
	}
	defer func() {
		for _, s := range c.slots {
			if w := s.w.Load(); w != nil {
				w.hold(-1)
			}
		}
	}()
	start()
}

// asyncRetry is what it takes to send an asynchronous call again: its
// header and metadata are made anew from them, as they were for the first
// attempt (kept instead, they cost every call a copy).
type asyncRetry struct {
	c       *Client
	ctx     context.Context
	payload []byte
	codec   proto.Codec
}

// finishAsync completes the asynchronous call cl whose attempt ended with
// err, or, if Call would send it again, has a goroutine do so and complete
// it.
func (cl *call) finishAsync(err error) {
	r := &cl.retry
	if err == nil || r.c == nil {
		cl.complete(err)
		return
	}
	c := r.c
	if !(err == c.noConn && c.opts.WaitForReady) && (c.opts.MaxRetries <= 0 || !c.retryable(cl.route, err, cl.torn)) {
		cl.complete(err)
		return
	}
	cl.deadline = 0 // the retry's context bears it
	then, typed, retry := cl.then, cl.typed, *r
	cl.then, cl.typed = nil, typedAsync{} // while Call's retry has it, it completes as Call's do
	go func() {
		ctx, b := c.sweep.bound(retry.ctx, c.opts.Timeout)
		h := proto.Header{Kind: proto.KindRequest, Codec: retry.codec}
		err := c.retry(ctx, h, cl.route, engine.Metadata(retry.ctx), retry.payload, cl, err)
		b.release()
		cl.then, cl.typed = then, typed
		cl.complete(err)
	}()
}

// complete ends the asynchronous call cl with err: it runs its done
// function, then releases cl.
func (cl *call) complete(err error) {
	if cl.stop != nil {
		cl.stop()
	}
	if err != nil {
		err = transport.Received(err)
	}
	if t := cl.typed; t.done != nil {
		if err == nil {
			err = transport.DecodeReplyWith(t.codec, cl.route, cl.reply, t.out)
		}
		cl.buf = cl.reply[:0] // grown by the reply, kept for the next call
		t.done(err)
	} else {
		cl.then(cl.reply, err)
	}
	putCall(cl)
}

// asyncSweep is a client's part in enforcing the deadlines of its
// asynchronous calls whose contexts never end (Options.Timeout): the
// process's one sweep goroutine (asyncSweeps) looks every sweepEvery at
// the clients listed with it, fails their calls past their deadlines,
// telling the server (Cancel), and unlists a client once none of its calls
// with a deadline waits. One goroutine for every client, not one each: a
// load generator's 10,000 clients of one connection each started one per
// call that waited, 100,000 a second.
type asyncSweep struct {
	listed atomic.Bool // on asyncSweeps' list
}

// watch makes sure the sweep looks at c: a call with a deadline waits.
func (s *asyncSweep) watch(c *Client) {
	if !s.listed.Load() && s.listed.CompareAndSwap(false, true) {
		asyncSweeps.add(c)
	}
}

// asyncSweeps is the process's sweep of asynchronous calls' deadlines.
var asyncSweeps sweeper

// sweeper is a goroutine that looks at its clients every sweepEvery while
// any is listed, and ends when none is.
type sweeper struct {
	mu      sync.Mutex
	clients []*Client
	running bool
	spare   []*Client // the list a look walked, for the next
}

// add lists c, starting the goroutine if it is not running.
func (w *sweeper) add(c *Client) {
	w.mu.Lock()
	w.clients = append(w.clients, c)
	start := !w.running
	w.running = true
	w.mu.Unlock()
	if start {
		go w.run()
	}
}

// run looks every sweepEvery until no client is listed.
func (w *sweeper) run() {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for range t.C {
		w.mu.Lock()
		look := w.clients
		w.clients = w.spare[:0]
		w.mu.Unlock()
		var keep []*Client
		now := time.Now().UnixNano()
		for _, c := range look {
			if c.ctx.Err() == nil && c.async.look(c, now) {
				keep = append(keep, c)
				continue
			}
			// Unlisted, then looked at again: a call that came in between
			// found c listed and did not list it.
			c.async.listed.Store(false)
			if c.ctx.Err() == nil && c.async.look(c, now) && c.async.listed.CompareAndSwap(false, true) {
				keep = append(keep, c)
			}
		}
		clear(look)
		w.mu.Lock()
		w.clients = append(w.clients, keep...)
		w.spare = look[:0]
		if len(w.clients) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
	}
}

// look fails the asynchronous calls past their deadlines at now, and
// reports whether any with a deadline still waits.
func (s *asyncSweep) look(c *Client, now int64) bool {
	waiting := false
	for _, sl := range c.slots {
		w := sl.w.Load()
		if w == nil || !w.pending.Waiting() {
			continue
		}
		late := w.pending.TakeIf(func(cl *call) bool {
			if !cl.async() || cl.deadline == 0 {
				return false
			}
			if cl.deadline > now {
				waiting = true
				return false
			}
			return true
		})
		for id, cl := range late {
			w.abandon(id)
			cl.complete(engine.ContextError(context.DeadlineExceeded, cl.route))
		}
	}
	return waiting
}
