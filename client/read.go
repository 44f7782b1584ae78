package client

import (
	"context"
	"errors"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/internal/engine"
	"github.com/rpcd/rpcd/internal/readbuf"
	"github.com/rpcd/rpcd/proto"
)

// Reading a connection. One goroutine at a time reads a wire: the holder of
// its read token. A caller whose request is out takes the token when it is
// free and reads until its own reply comes (it leads), so that the reply
// wakes it straight from the network poller, as it wakes a goroutine that
// writes and then reads its own socket. Handing every reply from a reader
// goroutine to its caller instead costs the Go scheduler a second thread's
// wake-up and sleep per call: about half of a sequential call's client CPU
// time (docs/performance.md, "Where the time goes").
//
// The wire's listener goroutine takes the token whenever someone must read
// and no caller does: while calls of callers that do not read wait (more
// callers on the connection than one, futures), while the client must hear
// the server at any moment (it serves routes or takes pushes, subscribes,
// has streams open, or the server is going away), and once callers have
// left the token unused for lingerIdle or so (the client's lingerWatch sees
// to that), so that a GoAway, a Ping or a lost connection is noticed
// between calls. Whoever gives the token up decides which: release. Once it
// has taken the token for that, the listener keeps it while calls stay
// sparse (listenRead): callers then wait for it as behind any reader. With
// more connections than one, it offers its connection meanwhile to calls
// that find none free (idleWires), so that they come close enough together
// for it to hand the connection over.

const (
	// lingerIdle is how long the token may stay unused, at the least,
	// before the listener takes it: a sequential caller's next call within
	// it reads its own reply again.
	lingerIdle = time.Millisecond

	// leadFor bounds how long a caller whose context can be cancelled
	// reads for its reply, and so how late it may notice the cancel (a
	// deadline it notices on time). A reply slower than that is waited
	// for as the listener delivers it, on the context too.
	leadFor = 20 * time.Millisecond

	// lingerMax bounds how far apart the watch's looks grow while callers
	// keep reading their own replies (a timer due within a millisecond or
	// two costs every call: lingerWatch), and so how long the listener may
	// take to notice they stopped: at most twice that.
	lingerMax = 64 * time.Millisecond
)

// reading is a wire's read side. What a call's reply touches comes
// first, the buffer and its source inside it: at 10,000 connections each
// reply finds its connection's lines cold, and a line fewer is a miss
// fewer (docs/performance.md).
type reading struct {
	tok atomic.Bool // held by whoever reads br

	// Owned by the token's holder:
	inBatch bool      // it set wire.batching: it calls endBatch before it reads the socket or lets go
	woke    bool      // a reply of the batch woke a caller
	lapsed  bool      // a deadline passed while a frame was being read in
	now     time.Time // read once a batch for an AsyncCaller's or a pipe's reply (stamp); zero until then
	mono    int64     // now, monoNow's, for a pipe's reply
	pipes   []*Pipe   // the pipes it holds, until the batch's end (endPipes)

	br       readbuf.Buf // 4 to 64 KiB: frames up to its Size are read whole
	fdr      fdReader    // br's source on an event loop (loops_linux.go)
	heardSrc heardReader // br's source with Options.KeepAlive: the socket, marking w.heard
	own      *call       // a leader's own call, whose reply wakes no one

	deadline time.Time     // the read deadline set on the connection, as far as known; the token holder's
	kick     chan struct{} // asks the listener to take the token

	releases atomic.Uint64 // times the token was given up, for the watch
	watch    *lingerWatch  // the client's
	watched  atomic.Bool   // among the watch's wires; set under its mutex
	lingered atomic.Bool   // the watch kicked the listener: the token went unused
	seen     uint64        // releases at the watch's last look; owned by the watch
	looked   bool          // the watch has looked since adding the wire; owned by it

	idle   *idleWires  // the client's idle connections; nil with one
	listed atomic.Bool // among them

	// Owned by the listener:
	sparse    bool      // calls come further apart than lingerIdle: keep reading
	lastReply time.Time // when it last finished a frame with nothing left to read
	listened  uint64    // frames it read (tests look once the wire's goroutines end)
}

// longAgo is a read deadline in the past: a blocked read returns at once.
var longAgo = time.Unix(1, 0)

func (r *reading) init(src io.Reader, idle *idleWires, watch *lingerWatch) {
	r.idle = idle
	r.watch = watch
	r.br.Init(src)
	r.kick = make(chan struct{}, 1)
	r.sparse = true // until two calls come close together
}

// tryLead takes the read token if it is free.
func (w *wire) tryLead() bool {
	return w.loop == nil && !w.rd.tok.Load() && w.rd.tok.CompareAndSwap(false, true)
}

// needRead makes sure someone will read w, for a call or stream whose
// starter does not: the token's holder sees it when it lets go; with the
// token free, the listener takes it.
func (w *wire) needRead() {
	if w.loop == nil && !w.rd.tok.Load() { // a loop reads whenever bytes come
		w.wakeListener()
	}
}

func (w *wire) wakeListener() {
	select {
	case w.rd.kick <- struct{}{}:
	default:
	}
}

// release gives the token up, with the connection's bytes read up to a
// frame's end or within one small enough to be kept in the buffer. If
// someone must read on, the listener is woken; if not, the watch wakes it
// once the token goes unused. The check follows the store, so that a caller
// who found the token held before it was let go is seen here.
func (w *wire) release() {
	if w.rd.inBatch {
		w.endBatch()
	}
	half := w.rd.br.Buffered() > 0 // part of a frame, or frames for others
	w.rd.releases.Add(1)
	w.rd.tok.Store(false)
	if half || w.mustListen() {
		w.wakeListener()
		return
	}
	if !w.rd.watched.Load() {
		w.rd.watch.add(w)
	}
	if w.rd.idle != nil {
		w.rd.idle.put(w)
	}
}

// listIdle offers w, which its listener reads with no call waiting, to
// the client's callers (idleWires).
func (w *wire) listIdle() {
	if w.rd.idle != nil {
		w.rd.idle.put(w)
	}
}

// mustListen reports whether someone must read w although no caller does.
func (w *wire) mustListen() bool {
	return w.srv.reg != nil || w.srv.pushes != nil || w.goingAway.Load() ||
		!w.srv.subs.empty() || w.streams.Open() > 0 || w.pending.Waiting() || w.pipesWaiting()
}

// listen is the wire's listener goroutine: it reads whenever the token is
// free and it is woken, until the wire fails.
func (w *wire) listen() {
	defer w.wg.Done()
	for {
		if w.rd.tok.CompareAndSwap(false, true) {
			if err := w.listenRead(); err != nil {
				w.fail(err)
				return
			}
		}
		select {
		case <-w.rd.kick:
			if w.rd.lingered.Swap(false) {
				// The watch found the token unused: calls are sparse,
				// and giving the token up after each would cost a
				// wake-up of the watch and of this goroutine per call.
				w.rd.sparse = true
			}
		case <-w.done:
			return
		}
	}
}

// listenRead reads frames, holding the token, until no one needs it to; it
// returns with the token released, or with the error that broke the wire.
// While calls are sparse it keeps the token, reading for them as they come,
// until two come within lingerIdle of each other: then the next caller may
// read for itself.
func (w *wire) listenRead() error {
	w.setReadDeadline(time.Time{})
	if w.rd.sparse {
		w.listIdle()
	}
	for {
		n, err := w.readFrame()
		w.rd.listened += uint64(n)
		if err != nil {
			if !isTimeout(err) {
				return err
			}
			// Only the token's holder sets deadlines, and this one
			// cleared any a leader left: read on rather than fail.
			w.rd.deadline = longAgo
			w.setReadDeadline(time.Time{})
		}
		w.rd.lapsed = false
		if w.rd.br.Buffered() == 0 && !w.mustListen() {
			now := time.Now()
			near := now.Sub(w.rd.lastReply) < lingerIdle
			w.rd.lastReply = now
			if w.rd.sparse && !near {
				w.listIdle() // again, if a call took it off the list
				continue
			}
			w.rd.sparse = false
			w.release()
			return nil
		}
	}
}

// lead reads w for a caller that holds the token, until the caller's call
// cl completes or ctx ends, and returns true with the call's error. Replies
// to other calls it meets are delivered on the way. A caller whose context
// can be cancelled reads for at most about leadFor: then it returns false,
// to wait for its reply as any caller does, on ctx too, while the listener
// reads. Either way it has released the token.
func (w *wire) lead(ctx context.Context, cl *call, route string) (bool, error) {
	w.rd.own = cl
	defer func() {
		w.rd.own = nil
		w.release()
	}()
	canEnd := ctxCanEnd(ctx)
	if canEnd {
		w.leadDeadline(ctx)
	}
	for {
		select {
		case <-cl.done:
			return true, cl.err
		default:
		}
		_, err := w.readFrame()
		if err != nil && !isTimeout(err) {
			w.fail(err) // completes every call, cl among them
			<-cl.done
			return true, cl.err
		}
		if err == nil && !w.rd.lapsed {
			continue
		}
		w.rd.lapsed = false
		w.rd.deadline = longAgo // passed
		if !canEnd {
			w.setReadDeadline(time.Time{}) // a deadline left by a caller before
			continue
		}
		if ended := ctxEnded(ctx); ended != nil && w.forget(cl) {
			w.abandon(cl.id)
			return true, engine.ContextError(ended, route)
		}
		// A call no longer in the table is complete (only the token's
		// holder takes calls out, and completes them before it reads on).
		// One still waiting stops leading: its caller waits on ctx too.
		select {
		case <-cl.done:
			return true, cl.err
		default:
			return false, nil
		}
	}
}

// leadDeadline sets the read deadline of a leader whose context can end:
// the context's deadline if it comes first, else a time between leadFor/2
// and leadFor from now. The deadline is moved only when it must be, not for
// every call: a read deadline costs a runtime timer's update.
func (w *wire) leadDeadline(ctx context.Context) {
	t := w.rd.deadline
	if t.IsZero() || time.Until(t) < leadFor/2 { // one clock read, the monotonic one
		t = time.Now().Add(leadFor)
	}
	if dl, ok := ctx.Deadline(); ok && dl.Before(t) {
		t = dl
	}
	if !t.Equal(w.rd.deadline) {
		w.setReadDeadline(t)
	}
}

// ctxCanEnd reports whether ctx can end: it has a deadline or can be
// cancelled. The deadline is asked first: a timeoutCtx's Done would have
// the sweep watch it, which a caller reading for itself does not need.
func ctxCanEnd(ctx context.Context) bool {
	if _, ok := ctx.Deadline(); ok {
		return true
	}
	return ctx.Done() != nil
}

// ctxEnded returns why ctx has ended, nil if it has not; a deadline passed
// by the clock counts before ctx's own timer fires.
func ctxEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// setReadDeadline sets the connection's read deadline for the token's
// holder, touching the socket only when it may change.
func (w *wire) setReadDeadline(t time.Time) {
	if t.IsZero() && w.rd.deadline.IsZero() {
		return
	}
	_ = w.nc.SetReadDeadline(t)
	w.rd.deadline = t
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// readFrame reads and handles the next frame, and with it every other whole
// frame the read buffer holds by then, and returns how many it handled. A
// response's payload goes straight into the waiting call's buffer. A read
// deadline passing before a frame is whole returns the timeout with the
// bytes kept in the buffer, for the next read; one passing within a frame
// larger than the buffer is noted in rd.lapsed and the frame read to its
// end. A reader that returns an error holds no pipe (endPipes): whoever
// reads on, or fails the wire, may need one.
func (w *wire) readFrame() (int, error) {
	n, err := w.readOne()
	if err != nil && len(w.rd.pipes) > 0 {
		w.endPipes()
	}
	return n, err
}

// readOne is readFrame's frames.
func (w *wire) readOne() (int, error) {
	br := &w.rd.br
	if w.rd.inBatch && br.Buffered() < proto.HeaderSize {
		w.endBatch() // what the batch's callers queued goes before the next read waits
	}
	hdr, err := br.Peek(proto.HeaderSize)
	if err != nil {
		return 0, err
	}
	var f proto.Frame
	h := &f.Header // decoded in place: its sections are filled in below
	if err := proto.DecodeHeaderInto(h, hdr, &w.lim); err != nil {
		w.goAwayAndClose(err)
		if !looksLikeRPCD(hdr) { // an HTTP server's 400, a TLS alert: say so
			err = errors.New("rpcd: " + notRPCD(w.nc.RemoteAddr().String(), hdr))
		}
		return 0, err
	}
	n := h.Len()
	if n > br.Size() && w.loop != nil && !w.rd.fdr.block {
		return 0, errLarge // read on a goroutine that may wait for its bytes (readLarge)
	}
	if n <= br.Size() {
		b, err := br.Peek(n)
		if err != nil {
			return 0, err
		}
		if err := proto.DecodeFrame(&f, b); err != nil { // the header is checked: only its sections are left
			w.goAwayAndClose(err)
			return 0, err
		}
		return w.handleBuffered(&f, n)
	}

	// A frame larger than the read buffer. A Response's payload is read
	// into the call's buffer directly; any other frame (a long error
	// message, a large request the client refuses) is rare, and read whole
	// into a buffer of its own.
	if h.Kind != proto.KindResponse {
		b := make([]byte, n)
		if err := w.readFull(b); err != nil {
			return 0, err
		}
		f, _, err := proto.Decode(b, &w.lim)
		if err != nil {
			w.goAwayAndClose(err)
			return 0, err
		}
		w.handle(&f)
		if w.goingAway.Load() {
			w.closeIfIdle()
		}
		return 1, nil
	}
	pre := proto.HeaderSize + int(h.MetadataLen) // a Response has no route
	b, err := br.Peek(pre)
	if err != nil {
		return 0, err
	}
	if err := proto.Metadata(b[proto.HeaderSize:]).Validate(); err != nil {
		w.goAwayAndClose(err)
		return 0, err
	}
	if _, err := br.Discard(pre); err != nil {
		return 0, err
	}
	if p, e := w.pipeCallFor(h.ID); e != nil {
		reply, err, rerr := w.readReply(e.reply, h)
		if rerr == nil {
			w.stampPipe(p)
		}
		// A payload read straight into the call's buffer has written to it.
		p.finish(e, reply, err, rerr != nil && h.Flags.Compression() == proto.CompressionNone)
		return 1, rerr
	}
	w.endPipes()
	cl := w.take(h.ID)
	if cl == nil {
		return 1, w.skip(int(h.PayloadLen))
	}
	reply, err, rerr := w.readReply(cl.reply, h)
	cl.reply = reply
	// A payload read straight into the call's buffer has written to it.
	cl.torn = rerr != nil && h.Flags.Compression() == proto.CompressionNone
	if rerr == nil {
		w.stamp(cl)
	}
	cl.finish(err)
	return 1, rerr
}

// handleBuffered handles f, the first n bytes of the read buffer, decoded,
// and every whole frame after it there, and discards them: in one pass over
// the buffer, as they came in one read or a few. The frames' bytes stay put
// until the discard at the end (only the token's holder reads br). A frame
// that breaks the protocol ends the pass: the next readOne reports it as it
// reports any.
func (w *wire) handleBuffered(f *proto.Frame, n int) (int, error) {
	br := &w.rd.br
	b := br.Bytes()
	used, frames := 0, 0
	for {
		if !w.rd.inBatch && f.Kind == proto.KindResponse {
			w.beginBatch()
		}
		w.handle(f)
		used += n
		frames++
		if w.goingAway.Load() {
			w.closeIfIdle()
		}
		var err error
		if n, err = f.Decode(b[used:], &w.lim); n == 0 || err != nil {
			break // a frame not whole yet; or a bad one, for the next readOne
		}
	}
	_, err := br.Discard(used)
	return frames, err
}

// readReply reads the payload of a large reply whose header is h, the
// rest of its frame, appended to reply: straight into it, or, compressed,
// into a pooled buffer and expanded into it. It returns the reply, the
// call's error, and the read's if the connection was lost on the way
// (reply is then as it was, and the call's error Unavailable).
func (w *wire) readReply(reply []byte, h *proto.Header) ([]byte, error, error) {
	n := int(h.PayloadLen)
	if h.Flags.Compression() != proto.CompressionNone {
		bp := compression.GetBuffer()
		z := slices.Grow(*bp, n)[:n]
		defer compression.PutBuffer(bp, z)
		if err := w.readFull(z); err != nil {
			return reply, lostReading(err), err
		}
		reply, err := engine.Expand(reply, z, h, w.lim.MaxFrameSize)
		return reply, err, nil
	}
	start := len(reply)
	// Room for the payload, not zeroed where the buffer has it already:
	// the read overwrites it (zeroing a 1 MiB reply first cost a tenth of
	// the client's CPU in the 1 MiB echo).
	reply = slices.Grow(reply, n)[:start+n]
	if err := w.readFull(reply[start:]); err != nil {
		return reply[:start], lostReading(err), err
	}
	return reply, nil, nil
}

// lostReading is the error of a call whose reply's connection was lost,
// with err, while the reply was read in.
func lostReading(err error) error {
	return &handler.Error{Code: proto.CodeUnavailable, Message: "connection lost while reading the reply: " + err.Error()}
}

// beginBatch opens a batch of frames read together, for the token's
// holder: frames queued from now on wait for endBatch.
func (w *wire) beginBatch() {
	w.wmu.Lock()
	w.batching = true
	w.wmu.Unlock()
	w.rd.inBatch, w.rd.woke, w.rd.now, w.rd.mono = true, false, time.Time{}, 0
}

// stamp tells an AsyncCaller's call when its reply was read (Answered):
// the batch's time, the clock read at the first that asks, once a batch
// (a reply read apart from a batch reads it).
func (w *wire) stamp(cl *call) {
	a := cl.owner
	if a == nil {
		return
	}
	a.at = w.batchTime()
}

// batchTime is when the replies of the reader's batch were read: the clock
// read at the first reply that asks, once a batch (a reply read apart from
// a batch reads it).
func (w *wire) batchTime() time.Time {
	if w.rd.now.IsZero() || !w.rd.inBatch {
		w.rd.now = time.Now()
		w.rd.mono = int64(w.rd.now.Sub(monoBase))
	}
	return w.rd.now
}

// batchMono is batchTime, monoNow's: a pipe's reply asks it, and the
// batch's clock, once read, is one word to look at.
func (w *wire) batchMono() int64 {
	if w.rd.mono == 0 || !w.rd.inBatch {
		w.batchTime()
	}
	return w.rd.mono
}

// endBatch closes the batch: if its replies woke callers, it first lets
// them run, so that the next calls they make join the queue, then hands
// the queue to the writer goroutine, to go in one write. The reader never
// writes itself: blocked in a write to a server blocked writing to it, it
// would deadlock.
func (w *wire) endBatch() {
	w.endPipes()
	w.rd.inBatch = false
	if w.rd.woke {
		runtime.Gosched()
	}
	w.wmu.Lock()
	w.batching = false
	if len(w.wbuf) == 0 {
		w.wmu.Unlock()
		return
	}
	w.queuedLocked()
}

// readFull reads the rest of a frame into b. A read deadline does not stop
// it: the frame is on its way, and whoever read next would need it read.
func (w *wire) readFull(b []byte) error {
	for len(b) > 0 {
		n, err := w.rd.br.Read(b)
		b = b[n:]
		if err != nil && !w.lapse(err) {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// skip reads past n bytes of a frame, as readFull does.
func (w *wire) skip(n int) error {
	for n > 0 {
		m, err := w.rd.br.Discard(n)
		n -= m
		if err != nil && !w.lapse(err) {
			return err
		}
	}
	return nil
}

// lapse notes a read deadline passing within a frame, and clears it so the
// frame can be read on; it reports whether err was that.
func (w *wire) lapse(err error) bool {
	if !isTimeout(err) {
		return false
	}
	w.rd.lapsed = true
	w.rd.deadline = longAgo
	w.setReadDeadline(time.Time{})
	return true
}

// lingerWatch hands the read token of a client's connections back to their
// listeners once callers stop using it. A caller only counts its release
// of the token; the watch looks at the connections whose callers read, on
// one timer for the whole client, and wakes the listener of any whose
// token was not used between two looks. Its looks start lingerIdle apart
// and grow to lingerMax while callers keep reading.
//
// Why not a timer reset at each release (the first design): a runtime
// timer due within a millisecond or two costs every call, however rarely
// it fires. A sequential call took 2.3 us more client CPU with it (18.3
// against 15.9, docs/performance.md), and as much with this watch looking
// every millisecond. The likely cause: while such a timer is pending, each
// idle wait of the Go scheduler (epoll_pwait) arms a kernel timer due that
// soon, which a virtual machine pays for dearly; one due far off is cheap.
type lingerWatch struct {
	mu     sync.Mutex
	wires  []*wire
	timer  *time.Timer   // runs look; armed while wires is not empty
	every  time.Duration // between looks
	closed bool
}

func newLingerWatch() *lingerWatch {
	lw := &lingerWatch{}
	lw.timer = time.AfterFunc(time.Hour, lw.look)
	lw.timer.Stop()
	return lw
}

// add watches w, whose caller just released its token.
func (lw *lingerWatch) add(w *wire) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.closed || w.rd.watched.Load() {
		return
	}
	w.rd.watched.Store(true)
	w.rd.looked = false // the token gets a whole period, not what is left of one
	lw.wires = append(lw.wires, w)
	if len(lw.wires) == 1 {
		lw.every = lingerIdle
		lw.timer.Reset(lw.every)
	}
}

// look wakes the listener of every watched wire whose token has gone
// unused since the last look, and stops watching it.
func (lw *lingerWatch) look() {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	keep := lw.wires[:0]
	kicked := false
	for _, w := range lw.wires {
		n := w.rd.releases.Load()
		switch {
		case w.dead():
			w.rd.watched.Store(false)
		case !w.rd.looked || n != w.rd.seen: // in use
			w.rd.looked, w.rd.seen = true, n
			keep = append(keep, w)
		case w.rd.tok.Load():
			// Held since the last look: by the listener, or by a caller
			// whose reply is slow, whose release will bring it back. A
			// release since n was read may have found the wire still
			// watched and not brought it back: then keep it.
			w.rd.watched.Store(false)
			if m := w.rd.releases.Load(); m != n {
				w.rd.watched.Store(true)
				w.rd.seen = m
				keep = append(keep, w)
			}
		default:
			w.rd.watched.Store(false)
			w.rd.lingered.Store(true)
			w.wakeListener()
			kicked = true
		}
	}
	clear(lw.wires[len(keep):])
	lw.wires = keep
	if kicked {
		lw.every = lingerIdle
	} else {
		lw.every = min(2*lw.every, lingerMax)
	}
	if len(keep) > 0 && !lw.closed {
		lw.timer.Reset(lw.every)
	}
}

// stop ends the watch, when the client closes.
func (lw *lingerWatch) stop() {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.closed = true
	lw.timer.Stop()
	clear(lw.wires)
	lw.wires = nil
}

// idleWires are a client's connections that no call waits on, the one
// listed last on top: those no one reads, which their last reader released,
// and those whose listener reads while calls on them are sparse. With more
// connections than one, pick takes a call to one of them before going round
// robin, first to one no one reads: its caller then reads its own reply,
// instead of waiting behind another caller who reads (or the listener) on a
// busy connection.
//
// Why the listeners' connections too: they start that way (and go back to it
// after a lull), and a busy client whose calls found only the others would
// send them one only by round robin, now and then, too sparsely for its
// listener ever to hand it over; a tenth of the calls of 100 callers on 100
// connections waited for a listener so, at the cost of a hand-over each.
// Taken when no other is idle, such a connection gets the calls that would
// have gone round robin, close enough together for its listener to hand it
// over (listenRead).
type idleWires struct {
	mu  sync.Mutex
	ws  []*wire
	max int // the client's connections: a bound on live entries
}

// put adds w, which its last reader released with nothing waiting, or whose
// listener reads while calls are sparse.
func (p *idleWires) put(w *wire) {
	if !w.rd.listed.CompareAndSwap(false, true) {
		return
	}
	p.mu.Lock()
	if len(p.ws) >= p.max { // entries for wires that died: drop them
		live := p.ws[:0]
		for _, x := range p.ws {
			if x.dead() {
				x.rd.listed.Store(false)
				continue
			}
			live = append(live, x)
		}
		clear(p.ws[len(live):])
		p.ws = live
	}
	p.ws = append(p.ws, w)
	p.mu.Unlock()
}

// get takes the wire listed last that no one reads; failing that, the one
// listed last whose token is held with no call waiting (its listener's, as
// a rule); nil if there is neither. Wires found with calls waiting are
// dropped on the way, as are those no longer usable: whoever reads a busy
// one lists it again when it lets go with nothing waiting.
func (p *idleWires) get() *wire {
	p.mu.Lock()
	defer p.mu.Unlock()
	held := -1
	for i := len(p.ws) - 1; i >= 0; i-- {
		w := p.ws[i]
		read := w.rd.tok.Load()
		switch {
		case !w.usable() || read && (w.pending.Waiting() || w.pipesWaiting()):
			p.take(i)
			if held > i {
				held--
			}
		case !read:
			return p.take(i)
		case held < 0:
			held = i
		}
	}
	if held < 0 {
		return nil
	}
	return p.take(held)
}

// take removes the i-th entry and returns its wire.
func (p *idleWires) take(i int) *wire {
	w := p.ws[i]
	p.ws = slices.Delete(p.ws, i, i+1)
	w.rd.listed.Store(false)
	return w
}
