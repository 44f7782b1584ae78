package client

import (
	"context"
	"slices"
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
	h, md, err := engine.Header(ctx, proto.KindRequest, codec, route, payload, &c.opts.Limits)
	if err != nil {
		cl.complete(err)
		return
	}
	c.sendAsync(ctx, &h, md, route, payload, cl, 0)
}

// sendAsync sends the asynchronous call cl, its done function and route
// set, its header *h and metadata md built from ctx (engine.Header), h
// completed here. start is when its Options.Timeout counts from,
// monoNow's; 0 is now.
func (c *Client) sendAsync(ctx context.Context, h *proto.Header, md proto.Metadata, route string, payload []byte, cl *call, start int64) {
	codec := h.Codec
	canEnd := ctx.Done() != nil // a context with a deadline can end: one that cannot has none
	if c.opts.Timeout > 0 && !(canEnd && hasDeadline(ctx)) {
		if start == 0 {
			start = monoNow()
		}
		cl.deadline = start + int64(c.opts.Timeout)
		h.Deadline = uint32((c.opts.Timeout + time.Millisecond - 1) / time.Millisecond)
	}
	// An attempt that fails later may be sent again. An AsyncCaller's
	// record keeps its retry while its caller's request is the same buffer.
	if r := &cl.retry; c.opts.MaxRetries > 0 && !r.holds(c, ctx, codec, payload) {
		*r = asyncRetry{c: c, ctx: ctx, payload: payload, codec: codec}
	}
	if canEnd {
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
	// and a pooled cl may then serve another call (an AsyncCaller's, its
	// next).
	deadline, unpooled := cl.deadline, cl.unpooled
	w, err := c.pick()
	if err == nil {
		h.ID, err = w.register(cl)
	}
	if err != nil {
		if err == c.noConn && c.opts.WaitForReady {
			// Waits for a connection (finishAsync); this is the one failure
			// WaitForReady alone sends again, so only it needs the retry.
			cl.retry = asyncRetry{c: c, ctx: ctx, payload: payload, codec: codec}
		}
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
	if deadline != 0 {
		w.async.watch(w, deadline)
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

// hasDeadline reports whether ctx has a deadline.
func hasDeadline(ctx context.Context) bool {
	_, ok := ctx.Deadline()
	return ok
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

// holds reports whether r is what a retry of payload, encoded with codec,
// through c under ctx needs: the same bytes of the same array.
func (r *asyncRetry) holds(c *Client, ctx context.Context, codec proto.Codec, payload []byte) bool {
	return r.c == c && r.ctx == ctx && r.codec == codec && len(r.payload) == len(payload) &&
		(len(payload) == 0 || &r.payload[0] == &payload[0])
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
	if !c.resendsAsync(cl.route, err, cl.torn) {
		cl.complete(err)
		return
	}
	cl.deadline = 0 // the retry's context bears it
	then, typed, retry := cl.then, cl.typed, *r
	cl.then, cl.typed = nil, typedAsync{} // while Call's retry has it, it completes as Call's do
	go func() {
		err := c.resend(retry.ctx, retry.codec, cl.route, engine.Metadata(retry.ctx), retry.payload, cl, err)
		cl.then, cl.typed = then, typed
		cl.complete(err)
	}()
}

// resendsAsync reports whether an asynchronous call of route that failed with
// err is sent again, as Call would send it (or wait for a connection to
// send it on, under Options.WaitForReady); torn says its reply had begun to
// arrive.
func (c *Client) resendsAsync(route string, err error, torn bool) bool {
	return err == c.noConn && c.opts.WaitForReady || c.opts.MaxRetries > 0 && c.retryable(route, err, torn)
}

// resend sends an asynchronous call whose attempt failed with err again,
// as Call does (Client.retry), through the pooled record cl, under ctx and
// Options.Timeout from now, and returns its outcome; on a goroutine of the
// call's own, as it may wait.
func (c *Client) resend(ctx context.Context, codec proto.Codec, route string, md proto.Metadata, payload []byte, cl *call, err error) error {
	ctx, b := c.sweep.bound(ctx, c.opts.Timeout)
	defer b.release()
	return c.retry(ctx, proto.Header{Kind: proto.KindRequest, Codec: codec}, route, md, payload, cl, err)
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
	if a := cl.owner; a != nil {
		a.answered(cl.reply, err)
		return // the record may be in flight again
	} else if t := cl.typed; t.done != nil {
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

// asyncSweep is a connection's part in enforcing the deadlines of its
// asynchronous calls whose contexts never end (Options.Timeout), a pipe's
// among them: the process's one sweep goroutine (asyncSweeps) looks at the
// connection once its earliest such deadline has passed, fails its calls
// past their deadlines, telling the server (Cancel), and looks again at the
// earliest of those still waiting, or unlists the connection if none is.
// One goroutine for every connection, not one each (a load generator's
// 10,000 connections each started one per call that waited, 100,000 a
// second), and a connection is looked at when a deadline may have passed,
// not every tick (10,000 looked at every 10 ms took half of the process's
// CPU). A connection's calls under Options.Timeout get later deadlines as
// they start, so a new call never needs an earlier look than the one
// listed. The mark is the connection's, on the lines its calls touch: at
// 10,000 connections a call that looked at its client's lines too paid a
// cache miss for it.
type asyncSweep struct {
	listed atomic.Bool // in asyncSweeps' wheel
}

// watch makes sure the sweep looks at w by deadline, that of a call that
// waits.
func (s *asyncSweep) watch(w *wire, deadline int64) {
	if !s.listed.Load() && s.listed.CompareAndSwap(false, true) {
		asyncSweeps.add(w, deadline)
	}
}

// asyncSweeps is the process's sweep of asynchronous calls' deadlines.
var asyncSweeps = sweeper{due: map[int64][]*wire{}}

// monoBase is the origin of monoNow.
var monoBase = time.Now()

// monoNow is the time of asynchronous calls' deadlines: nanoseconds since
// monoBase on the monotonic clock, which is read in about half the time of
// time.Now's wall and monotonic clocks together (a call under
// Options.Timeout reads it once).
func monoNow() int64 { return int64(time.Since(monoBase)) }

// monoTime is the Time of t, monoNow's; the zero Time for 0.
func monoTime(t int64) time.Time {
	if t == 0 {
		return time.Time{}
	}
	return monoBase.Add(time.Duration(t))
}

// sweeper is a goroutine that, every sweepEvery while any connection is
// listed, looks at the connections whose earliest deadlines have passed: a
// timing wheel of sweepEvery ticks, by the tick at whose end a deadline
// has passed, its buckets in a map (a few hundred, for deadlines seconds
// away).
type sweeper struct {
	mu      sync.Mutex
	due     map[int64][]*wire // by tick
	listed  int               // connections in due
	last    int64             // the last tick looked at
	running bool
}

// add lists w to be looked at once deadline (monoNow's) has passed,
// starting the goroutine if it is not running.
func (s *sweeper) add(w *wire, deadline int64) {
	t := (deadline + int64(sweepEvery) - 1) / int64(sweepEvery)
	s.mu.Lock()
	t = max(t, s.last+1)
	s.due[t] = append(s.due[t], w)
	s.listed++
	start := !s.running
	s.running = true
	s.mu.Unlock()
	if start {
		go s.run()
	}
}

// remove unlists w, failed: its calls have failed, and the goroutine need
// not wait for its deadlines to end.
func (s *sweeper) remove(w *wire) {
	if !w.async.listed.Load() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, ws := range s.due {
		if i := slices.Index(ws, w); i >= 0 {
			s.due[k] = slices.Delete(ws, i, i+1)
			s.listed--
			return
		}
	}
}

// run looks every sweepEvery at the connections come due, until none is
// listed.
func (s *sweeper) run() {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	var look []*wire
	for range t.C {
		now := monoNow()
		end := now / int64(sweepEvery) // the last tick wholly passed
		s.mu.Lock()
		for k, ws := range s.due {
			if k <= end {
				look = append(look, ws...)
				delete(s.due, k)
			}
		}
		s.last = max(s.last, end)
		s.listed -= len(look)
		s.mu.Unlock()
		for _, w := range look {
			if next, ok := w.sweepAsync(now); ok {
				s.add(w, next)
				continue
			}
			// Unlisted, then looked at again: a call that came in between
			// found w listed and did not list it.
			w.async.listed.Store(false)
			if next, ok := w.sweepAsync(now); ok && w.async.listed.CompareAndSwap(false, true) {
				s.add(w, next)
			}
		}
		clear(look)
		look = look[:0]
		s.mu.Lock()
		if s.listed == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}

// sweepAsync fails w's asynchronous calls past their deadlines at now, its
// pipes' among them, and returns the earliest deadline of those with one
// that still wait; false if none does, or w has failed.
func (w *wire) sweepAsync(now int64) (int64, bool) {
	if w.dead() {
		return 0, false
	}
	next, waiting := int64(0), false
	if ls := w.pipes.Load(); ls != nil {
		for _, l := range *ls {
			if d, ok := l.p.sweep(l, now); ok && (!waiting || d < next) {
				next, waiting = d, true
			}
		}
	}
	if !w.pending.Waiting() {
		return next, waiting
	}
	late := w.pending.TakeIf(func(cl *call) bool {
		if !cl.async() || cl.deadline == 0 {
			return false
		}
		if cl.deadline > now {
			if !waiting || cl.deadline < next {
				next = cl.deadline
			}
			waiting = true
			return false
		}
		return true
	})
	for id, cl := range late {
		w.abandon(id)
		cl.complete(engine.ContextError(context.DeadlineExceeded, cl.route))
	}
	return next, waiting
}
