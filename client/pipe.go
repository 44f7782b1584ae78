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

// A Pipe keeps up to a fixed number of calls in flight on its client's
// connections for a program that starts them from their completions: a
// load generator, a relay, a pipeline stage. It is the asynchronous calls'
// leanest form. Where each CallRawAsync or AsyncCaller call takes locks of
// its own (the connection's table of calls, its write queue, the record's
// state), a pipe holds its calls in a table of its own, behind one lock
// that the connection's reader takes once for a batch of the pipe's
// replies: it runs their done functions with the pipe held, and the calls
// they start (Next) go out together at the batch's end, in one write. At
// 128 calls in flight on one connection a pipe's call costs the client
// about what the server spends answering it, where an AsyncCaller's costs
// a quarter more (docs/performance.md).
//
// Its calls are CallRaw's with no context, so none is cancelled (a call
// that must be is CallRawAsync's): deadlines are
// Options.Timeout's, counted, for a call started from done, from when the
// batch of replies that ran done was read (Answered); retries and errors
// are CallRaw's, a call sent again (or waiting for a connection, under
// Options.WaitForReady) on a goroutine of its own, as a retry is rare.
// Calls go on one of the client's connections at a time (pick's choice at
// the first call, and again once it cannot take new calls), and fail as
// that connection's calls fail. With Options.Interceptors, which wait for
// the call, each call runs on a goroutine of its own.
//
// The rules that come with the lock: done runs with the pipe held, on the
// goroutine that reads the connection, and must not block; it may start
// calls on its own pipe with Next, and asynchronous calls anywhere, but
// must not call Call or Run on any pipe (that waits for a pipe's lock). A
// call that cannot be sent (no connection, the client closed, too large a
// request) completes at once, on the goroutine that starts it: a done
// function that starts the next call at once on every error loops as long
// as the client has no connection.
//
// A connection keeps the pipe that last sent on it listed, for its replies,
// until the pipe is closed (Close) or the connection ends; each reply
// looks through the pipes listed on its connection, so a program keeps a
// few pipes on a client, each for many calls.
type Pipe struct {
	// What a call touches, on three lines (its first connection's link
	// among them), then a one-call pipe's ring on the fourth: at 10,000
	// connections each line of a pipe a call touches is a cache miss.
	mu      sync.Mutex
	held    bool   // mu is held to run done functions or a Run: Next may start calls
	closed  bool   // Close was called: no call starts, and no connection keeps it listed once its calls there end
	wrapped bool   // the ids were reserved once cur's table's ids had wrapped: the table may hold one (nextID)
	icpt    bool   // the client has Options.Interceptors
	live    int32  // calls in flight (around, with interceptors, counted too)
	max     int32  // calls in flight at most
	mask    uint32 // len(ring)-1
	ids     uint32 // the next id reserved from cur's table (engine.Calls.Reserve)
	idsLeft uint32 // how many of them are left
	cur     *pipeLink
	c       *Client
	done    func(tag int, reply []byte, err error)
	start   int64 // what the deadlines of calls started while held count from, monoNow's; 0 until the first

	own     pipeLink      // the link of the pipe's first connection
	ring    []pipeCall    // the calls in flight, each at its id's place (id&mask)
	timeout time.Duration // the client's Options.Timeout
	at      int64         // the reply's batch's time, monoNow's, in done (Answered); 0 if none

	out   []byte // cur's requests, staged while held
	check engine.RouteCheck
	links []*pipeLink // the connections with calls of the pipe in flight, and cur

	small [1]pipeCall // the ring of a pipe of one call

	atOf   int64     // the at atTime is of (Answered)
	atTime time.Time // at as a Time
}

// pipeBlock is how many ids a pipe takes from its connection's table at a
// time: one locked instruction for that many calls.
const pipeBlock = 64

// A pipeLink is a pipe on one connection: what the connection's reader,
// its failure and the deadlines' sweep find the pipe's calls by.
type pipeLink struct {
	p       *Pipe
	w       *wire
	live    int32       // the pipe's calls in flight on w; guarded by p.mu
	waiting atomic.Bool // live > 0, for the wire's reader, which takes no lock to look: stored only as live leaves or comes back to 0
}

// pipeCall is a call in flight in a pipe: its place in the ring. What its
// reply reads comes first, on one line where the place starts a line.
type pipeCall struct {
	link     *pipeLink // nil: the place is free
	id       uint32
	codec    proto.Codec
	tag      int
	reply    []byte
	deadline int64 // monoNow's; 0 for none
	route    string
	req      []byte // for a retry
}

// NewPipe returns a pipe for up to max calls in flight at once, each
// completed with done: with its caller's tag, the reply appended to the
// reply buffer the call was given, or the call's error (as CallRaw would
// return it). done runs as the type's comment says.
func (c *Client) NewPipe(max int, done func(tag int, reply []byte, err error)) *Pipe {
	if max < 1 {
		panic("rpcd: client: a pipe of fewer than one call")
	}
	if max > 1<<20 {
		panic("rpcd: client: a pipe of more than 2^20 calls")
	}
	p := &Pipe{c: c, done: done, max: int32(max), timeout: c.opts.Timeout, icpt: c.icpt != nil}
	if max == 1 {
		p.ring = p.small[:] // its one call's place is free when the next starts
	} else {
		n := 2
		for n < 2*max {
			n *= 2
		}
		p.ring = make([]pipeCall, n)
	}
	p.mask = uint32(len(p.ring) - 1)
	return p
}

// Call starts a call of route with req, encoded with codec, its reply to
// be appended to reply, and sends it at once; done runs with tag once it
// has completed. req and reply are the call's until done runs (a call
// sent again sends req again). Call must not be called with the pipe
// held: from done, or from a Run function, start calls with Next.
func (p *Pipe) Call(tag int, codec proto.Codec, route string, req, reply []byte) {
	p.mu.Lock()
	p.held = true
	defer p.release() // a panic (too many calls) lets the pipe go too
	p.send(tag, codec, route, req, reply)
}

// Run runs f with the pipe held: the calls f starts with Next go out
// together, in one write, once it returns.
func (p *Pipe) Run(f func()) {
	p.mu.Lock()
	p.held = true
	defer p.release()
	f()
}

// Close closes the pipe: a call started from then on fails with
// ErrPipeClosed, the calls in flight complete as they would have, and once
// they have, no connection keeps the pipe.
func (p *Pipe) Close() {
	p.mu.Lock()
	p.held = true
	defer p.release()
	p.closed = true
	if l := p.cur; l != nil && l.live == 0 {
		p.unlink(l)
	}
}

// ErrPipeClosed is the error of a call started on a closed Pipe.
var ErrPipeClosed = transport.Received(&handler.Error{Code: proto.CodeUnavailable, Message: "pipe closed", Unprocessed: true})

// Next starts a call, as Call does, from done or a Run function: it goes
// out with the others started there, once done's batch of replies or the
// Run ends.
func (p *Pipe) Next(tag int, codec proto.Codec, route string, req, reply []byte) {
	if !p.held {
		panic("rpcd: client: Pipe.Next outside its done function or a Run")
	}
	p.send(tag, codec, route, req, reply)
}

// Answered returns, in done, when the reply of the call done completes
// was read: the time of its batch of replies, read once for the batch, on
// the monotonic clock (for Sub and Since; its wall clock does not follow
// the system's changes). It is the zero Time for a call that ended without
// a reply.
func (p *Pipe) Answered() time.Time {
	if p.at != p.atOf {
		p.answeredTime()
	}
	return p.atTime
}

// answeredTime makes the Time Answered returns: once a batch, as a Time's
// Add costs about what a pipe's call does. Not inlined, so that Answered
// is.
//
//go:noinline
func (p *Pipe) answeredTime() { p.atOf, p.atTime = p.at, monoTime(p.at) }

// release hands the calls started with the pipe held to their connection
// and lets the pipe go.
func (p *Pipe) release() {
	l := p.cur
	p.handOff()
	p.held, p.start, p.at = false, 0, 0
	p.mu.Unlock()
	if l != nil {
		l.w.needRead()
	}
}

// send starts a call with the pipe held.
func (p *Pipe) send(tag int, codec proto.Codec, route string, req, reply []byte) {
	if p.live >= p.max {
		panic("rpcd: client: more calls in flight in a pipe than it was made for")
	}
	c := p.c
	if p.closed {
		p.at = 0
		p.done(tag, reply, ErrPipeClosed)
		return
	}
	if p.icpt {
		p.around(tag, codec, route, req, reply)
		return
	}
	if !p.check.Fits(route, req) { // the limits, the client's lines, looked at only then
		if err := p.check.Check(route, req, &c.opts.Limits); err != nil {
			p.at = 0 // no reply was read
			p.done(tag, reply, transport.Received(err))
			return
		}
	}
	l := p.cur
	if l == nil || !l.w.usable() {
		var err error
		if l, err = p.bind(); err != nil {
			p.live++
			p.failCall(tag, codec, route, req, reply, err, false)
			return
		}
	}
	id := p.nextID(l)
	e := &p.ring[id&p.mask]
	e.link, e.id, e.codec, e.tag, e.reply, e.deadline, e.route, e.req = l, id, codec, tag, reply, 0, route, req
	var ms uint32 // the deadline the server is told, in milliseconds
	if p.timeout > 0 {
		if p.start == 0 { // once while held: from the batch's time, if a reply's done starts it
			if p.start = p.at; p.start == 0 {
				p.start = monoNow()
			}
		}
		e.deadline = p.start + int64(p.timeout)
		ms = uint32((p.timeout + time.Millisecond - 1) / time.Millisecond)
	}
	p.stage(l.w, codec, id, ms, route, req)
	p.live++
	if l.live++; l.live == 1 {
		l.waiting.Store(true)
	}
	if e.deadline != 0 {
		l.w.async.watch(l.w, e.deadline)
	}
}

// stage appends the Request of call id to w to the pipe's output, its
// payload compressed as the connection compresses calls.
func (p *Pipe) stage(w *wire, codec proto.Codec, id, deadline uint32, route string, req []byte) {
	if w.zip == proto.CompressionNone || len(req) < w.zipMin {
		p.out = proto.AppendRequest(p.out, id, 0, codec, deadline, route, req)
		return
	}
	req, z := w.compress(req)
	p.out = proto.AppendRequest(p.out, id, proto.Flags(0).WithCompression(z.as), codec, deadline, route, req)
	z.release()
}

// nextID returns an id for a call on l: the next of those reserved from
// its table, whose place in the ring is free, and, if the table's ids had
// wrapped when they were reserved, that the table holds no call with (ids
// reserved before are ids no call of the table has had since the last
// wrap). The table is looked at once a block, not a call.
func (p *Pipe) nextID(l *pipeLink) uint32 {
	for {
		if p.idsLeft == 0 {
			t := &l.w.pending
			p.ids, p.idsLeft = t.Reserve(pipeBlock), pipeBlock
			p.wrapped = t.Wrapped()
		}
		id := p.ids
		p.ids++
		p.idsLeft--
		if p.ring[id&p.mask].link != nil || p.wrapped && l.w.pending.Holds(id) {
			continue
		}
		return id
	}
}

// bind makes the connection pick chooses the one new calls go on; what
// was staged for the last one is handed to it first.
func (p *Pipe) bind() (*pipeLink, error) {
	p.handOff()
	w, err := p.c.pick()
	if err != nil {
		return nil, err
	}
	var l *pipeLink
	for _, x := range p.links {
		if x.w == w {
			l = x
		}
	}
	if l == nil {
		// A link is never reused: a reader or a failure that found it
		// listed may look at it after it is unlisted, and must find no call.
		if l = &p.own; l.p != nil {
			l = new(pipeLink)
		}
		l.p, l.w = p, w
		if err := w.addPipe(l); err != nil {
			return nil, err
		}
		p.links = append(p.links, l)
	}
	old := p.cur
	p.cur, p.idsLeft = l, 0
	if old != nil && old.live == 0 {
		p.unlink(old)
	}
	return l, nil
}

// handOff moves the frames staged for cur into its connection's write
// queue, which sends them as it sends what it queues (queuedLocked): at
// once, or at the end of the reader's batch.
func (p *Pipe) handOff() {
	if len(p.out) == 0 {
		return
	}
	w := p.cur.w
	w.wmu.Lock()
	if w.dead() || w.broken.Load() {
		w.wmu.Unlock() // the wire fails their calls (fail, failLink)
		p.out = p.out[:0]
		return
	}
	if len(w.wbuf) == 0 {
		w.wbuf, p.out = p.out, w.wbuf[:0]
	} else {
		w.wbuf = append(w.wbuf, p.out...)
		p.out = p.out[:0]
	}
	w.queuedLocked()
}

// finish completes the call e with reply and err, with the pipe held: its
// place is freed before done runs, so that done may start the next. A
// call that failed as CallRaw would send again is sent again (failCall); torn
// says its reply had begun to arrive.
func (p *Pipe) finish(e *pipeCall, reply []byte, err error, torn bool) {
	l := e.link
	e.link = nil // free; the rest is overwritten by the place's next call
	if l.live--; l.live == 0 {
		l.waiting.Store(false)
		if l != p.cur || p.closed {
			p.unlink(l)
		}
	}
	if err != nil {
		p.failCall(e.tag, e.codec, e.route, e.req, reply, err, torn)
		return
	}
	p.live--
	p.done(e.tag, reply, nil)
}

// failCall completes a call, counted in p.live, that failed with err, with
// the pipe held; or, if CallRaw would send it again, or wait for a
// connection to send it on, has a goroutine do that and complete it.
func (p *Pipe) failCall(tag int, codec proto.Codec, route string, req, reply []byte, err error, torn bool) {
	c := p.c
	if !c.resendsAsync(route, err, torn) {
		p.live--
		p.done(tag, reply, transport.Received(err))
		return
	}
	go func() {
		cl := getCall()
		cl.reply = reply
		err := c.resend(context.Background(), codec, route, nil, req, cl, err)
		reply := cl.reply
		putCall(cl)
		p.mu.Lock()
		p.held = true
		defer p.release()
		p.live--
		p.done(tag, reply, transport.Received(err))
	}()
}

// unlink forgets l, on which no call of the pipe waits and none will go
// but those staged, which go now.
func (p *Pipe) unlink(l *pipeLink) {
	for i, x := range p.links {
		if x == l {
			p.links = append(p.links[:i], p.links[i+1:]...)
			break
		}
	}
	if p.cur == l {
		p.handOff()
		p.cur = nil
	}
	l.w.removePipe(l)
}

// around runs a call through the client's interceptors, which wait for it,
// on a goroutine of its own, and completes it there with the pipe held.
func (p *Pipe) around(tag int, codec proto.Codec, route string, req, reply []byte) {
	p.live++
	c := p.c
	go func() {
		reply, err := callRaw(context.Background(), c, codec, route, req, reply)
		p.mu.Lock()
		p.held = true
		p.live--
		p.done(tag, reply, transport.Received(err))
		p.release()
	}()
}

// failLink fails the pipe's calls on l, whose connection failed, as the
// connection fails the calls of its table (lostCall).
func (p *Pipe) failLink(l *pipeLink, msg string, goneAway bool, last uint32, refused *handler.Error) {
	p.held = true
	defer p.release()
	for i := range p.ring {
		e := &p.ring[i]
		if e.link != l {
			continue
		}
		p.finish(e, e.reply, lostCall(e.id, msg, goneAway, last, refused), false)
	}
	if p.cur == l {
		p.out = p.out[:0] // their calls just failed
		p.unlink(l)
	}
}

// sweep fails the pipe's calls on l past their deadlines at now, telling
// the server, and returns the earliest deadline of those that still wait;
// false if none does.
func (p *Pipe) sweep(l *pipeLink, now int64) (int64, bool) {
	p.mu.Lock()
	p.held = true
	defer p.release()
	next, waiting := int64(0), false
	for i := range p.ring {
		e := &p.ring[i]
		if e.link != l || e.deadline == 0 {
			continue
		}
		if e.deadline > now {
			if !waiting || e.deadline < next {
				next = e.deadline
			}
			waiting = true
			continue
		}
		l.w.abandon(e.id)
		p.finish(e, e.reply, engine.ContextError(context.DeadlineExceeded, e.route), false)
	}
	return next, waiting
}

// The wire's side.

// pipeLinks is the pipes on a wire, replaced whole as one comes or goes.
type pipeLinks = []*pipeLink

// addPipe lists l among w's pipes; an error if w has failed.
func (w *wire) addPipe(l *pipeLink) error {
	w.pmu.Lock()
	defer w.pmu.Unlock()
	if w.err != nil {
		return w.err
	}
	var ls pipeLinks
	if old := w.pipes.Load(); old != nil {
		ls = append(ls, *old...)
	}
	ls = append(ls, l)
	w.setPipes(ls)
	return nil
}

// setPipes lists ls as w's pipes, with w.pmu held.
func (w *wire) setPipes(ls pipeLinks) {
	switch len(ls) {
	case 0:
		w.pipe.Store(nil)
		w.pipes.Store(nil)
	case 1:
		w.pipe.Store(ls[0])
		w.pipes.Store(&ls)
	default:
		w.pipe.Store(nil)
		w.pipes.Store(&ls)
	}
}

// removePipe unlists l.
func (w *wire) removePipe(l *pipeLink) {
	w.pmu.Lock()
	defer w.pmu.Unlock()
	old := w.pipes.Load()
	if old == nil {
		return
	}
	var ls pipeLinks
	for _, x := range *old {
		if x != l {
			ls = append(ls, x)
		}
	}
	w.setPipes(ls)
}

// pipesWaiting reports whether a pipe's call waits on w, without a lock.
func (w *wire) pipesWaiting() bool {
	if l := w.pipe.Load(); l != nil {
		return l.waiting.Load()
	}
	if ls := w.pipes.Load(); ls != nil {
		for _, l := range *ls {
			if l.waiting.Load() {
				return true
			}
		}
	}
	return false
}

// pipeCallFor returns the pipe call on w with id, and its pipe, held by
// the reader from then to the batch's end (endPipes); nil if no pipe's
// call has id. A pipe's reply opens a batch, if none is open, so that its
// end lets the pipe go.
func (w *wire) pipeCallFor(id uint32) (*Pipe, *pipeCall) {
	if l := w.pipe.Load(); l != nil { // one pipe: no list to walk
		return l.p, w.pipeCallOn(l, id)
	}
	if ls := w.pipes.Load(); ls != nil {
		for _, l := range *ls {
			if e := w.pipeCallOn(l, id); e != nil {
				return l.p, e
			}
		}
	}
	return nil, nil
}

// pipeCallOn returns l's pipe's call on w with id, nil if none, the pipe
// held by the reader (holdPipe).
func (w *wire) pipeCallOn(l *pipeLink, id uint32) *pipeCall {
	p := l.p
	if !w.rd.holds(p) {
		w.holdPipe(p)
	}
	if e := &p.ring[id&p.mask]; e.link == l && e.id == id {
		return e
	}
	return nil
}

// holdPipe takes p for the reader until the batch's end, opening a batch
// if none is open, so that its end lets the pipe go.
func (w *wire) holdPipe(p *Pipe) {
	if !w.rd.inBatch {
		w.beginBatch()
	}
	p.mu.Lock()
	p.held = true
	w.rd.pipes = append(w.rd.pipes, p)
}

// pipeReply completes the pipe call f answers, if a pipe's call has its
// id, and reports whether one did.
func (w *wire) pipeReply(f *proto.Frame) bool {
	p, e := w.pipeCallFor(f.ID)
	if e == nil {
		return false
	}
	w.stampPipe(p)
	reply, err := engine.Answer(f, e.reply, w.lim.MaxFrameSize)
	p.finish(e, reply, err, false)
	return true
}

// stampPipe tells p when the batch's replies were read (Answered).
// The Time Answered returns is made once a batch.
func (w *wire) stampPipe(p *Pipe) { p.at = w.batchMono() }

// endPipes lets go of the pipes the reader holds: the calls their done
// functions started are handed to their connections first.
func (w *wire) endPipes() {
	for i, p := range w.rd.pipes {
		p.release()
		w.rd.pipes[i] = nil
	}
	w.rd.pipes = w.rd.pipes[:0]
}

// holds reports whether the reader holds p.
func (r *reading) holds(p *Pipe) bool {
	for _, x := range r.pipes {
		if x == p {
			return true
		}
	}
	return false
}

// pipeHolds reports whether a pipe's call on w has id, for the table once
// its ids have wrapped (engine.Calls.SetSkip); true too when it cannot
// look without waiting, which costs the table an id.
func (w *wire) pipeHolds(id uint32) bool {
	ls := w.pipes.Load()
	if ls == nil {
		return false
	}
	for _, l := range *ls {
		p := l.p
		if !p.mu.TryLock() {
			return true
		}
		e := &p.ring[id&p.mask]
		held := e.link == l && e.id == id
		p.mu.Unlock()
		if held {
			return true
		}
	}
	return false
}

// failPipes fails the pipes' calls on w, which has failed: on this
// goroutine for a pipe it can take at once, else on one of the pipe's own,
// which waits for whoever holds it (the reader, it may be, which is why
// fail must not wait).
func (w *wire) failPipes(msg string, goneAway bool, last uint32, refused *handler.Error) {
	ls := w.pipes.Load()
	if ls == nil {
		return
	}
	for _, l := range *ls {
		p := l.p
		if p.mu.TryLock() {
			p.failLink(l, msg, goneAway, last, refused)
			continue
		}
		go func() {
			p.mu.Lock()
			p.failLink(l, msg, goneAway, last, refused)
		}()
	}
}
