package client

import (
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/internal/engine"
	"github.com/rpcd/rpcd/proto"
)

// wire is one live connection: its pending calls, its write queue and the
// goroutines that read and write it. A wire is never revived: when it fails,
// its slot dials a new one.
type wire struct {
	// What a call touches comes first: the table's own fields and its
	// one shard's lock on the first line, the write queue and the read
	// side's next. At 10,000 connections each call finds its connection's
	// lines cold, and a line fewer is a miss fewer (docs/performance.md).
	pending engine.Calls[call] // the calls waiting for replies

	loop *evLoop    // the event loop that reads it (Options.EventLoops); nil if its listener does
	raw  *rawWriter // nc's socket, written at a batch's end without waiting; nil if it has none
	fd   int        // its socket, on a loop: nc is closed (loops_linux.go)
	// pipe is the one pipe listed in pipes, nil if not one: what a reply
	// looks at first (pipe.go), on the line a call's start looks at too.
	pipe atomic.Pointer[pipeLink]
	// fdRefs holds fd open while it is used: the reader's hold, one per
	// write or shutdown under way, and fdGone once the reader let go.
	fdRefs atomic.Int32
	heard  atomic.Bool // bytes arrived since the keep-alive watch last looked

	goingAway atomic.Bool // the server sent GoAway: no new calls here
	broken    atomic.Bool // a write failed: nothing more is sent (writeFailed)
	failed    atomic.Bool // set as done is closed

	zip      proto.Compression // calls' payloads of zipMin bytes or more are compressed so
	flushing bool              // a goroutine is writing; it or the writer sends wbuf
	// batching is set while the read token's holder delivers a batch of
	// frames read together: the callers its replies wake, and the calls
	// their completions start, queue their frames without writing, and the
	// holder hands them all to the writer at the batch's end (endBatch).
	batching bool
	held     int32      // Batch calls running: asynchronous calls' frames wait for the last to end
	async    asyncSweep // ends its asynchronous calls' Options.Timeout deadlines (async.go)
	wmu      sync.Mutex
	wbuf     []byte // frames queued while a write is in progress
	spare    []byte // a written buffer, for reuse
	lim      proto.Limits

	rd reading // who reads the connection, and how (read.go)

	nc   net.Conn
	slot int32 // its place in the loop
	born time.Time

	pmu sync.Mutex
	err error // set once the wire has failed; guarded by pmu

	werr      error          // that write's error; guarded by pmu
	goAwayID  uint32         // its last call id; guarded by pmu
	goAwayErr *handler.Error // its reason, unless draining; guarded by pmu
	away      chan struct{}  // closed at the first GoAway

	alive aliveState // the keep-alive watch's (alive.go)

	zipMin    int
	wdl       bool      // a write deadline is set; owned by whoever is flushing
	wdeadline time.Time // on a loop, that deadline, kept by the wire

	pipes    atomic.Pointer[pipeLinks] // the pipes with calls here, or that send their next ones here (pipe.go)
	srv      *serving                  // the client's routes, for the server's calls
	calls    serverCalls               // the server's calls running here
	streams  engine.Streams            // open streams (stream.go)
	starting []func()                  // stream handlers to start once their first credit is queued; the reader's

	done chan struct{} // closed when the wire fails
	wg   sync.WaitGroup
}

// newWire starts the goroutines of a connection under o's limits: its
// listener (read.go), its writer and, if o.KeepAlive is positive, its
// keep-alive watch. Calls' payloads go compressed with zip (none: as they
// are), as the handshake settled.
func newWire(nc net.Conn, o *Options, zip proto.Compression, srv *serving, idle *idleWires, watch *lingerWatch) *wire {
	w := &wire{
		nc:     nc,
		fd:     -1,
		lim:    o.Limits,
		srv:    srv,
		born:   time.Now(),
		zip:    zip,
		zipMin: o.CompressMin,
		away:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	w.pending.Init(pendingShardsFor(o.Conns))
	w.pending.SetSkip(w.pipeHolds)
	liveWires.Add(1)
	w.streams.Init(&srv.streams, (*wireLink)(w))
	w.wg.Add(1) // the listener, or the loop's hold; a writer at each hand-over (kickWriter)
	var r io.Reader = nc
	var l *evLoop
	if o.EventLoops || testEventLoops {
		if l = pickLoop(); l != nil {
			w.fd = loopSocket(nc) // nc closed, unless it is no plain socket
		}
	}
	if w.fd >= 0 {
		w.rd.fdr = fdReader{fd: w.fd}
		w.fdRefs.Store(1)
		r = &w.rd.fdr
	} else if w.raw = newRawWriter(nc); w.raw != nil {
		r = newRawReader(nc)
	}
	if o.KeepAlive > 0 {
		w.rd.heardSrc = heardReader{w, r} // for the keep-alive watch (alive.go)
		r = &w.rd.heardSrc
	}
	w.rd.init(r, idle, watch)
	if w.fd >= 0 {
		w.joinLoop(l)
	} else {
		go w.listen()
	}
	return w
}

// usable reports whether new calls may go on w.
func (w *wire) usable() bool { return !w.dead() && !w.goingAway.Load() && !w.broken.Load() }

// pendingShards spreads the calls waiting on a client's connections over
// this many locks in all (engine.Calls), so that its callers and readers
// rarely meet on one: four for each P that may hold one at once, a power
// of two, at most 32. A client of one connection on two Ps holds 8 (2 KiB
// of table), where 32 held 10 KiB: most of a load generator's client of
// one connection, at 10,000 of them.
var pendingShards = min(32, 1<<bits.Len(uint(4*runtime.GOMAXPROCS(0)-1)))

// pendingShardsFor is the shards of a new connection's table, for a
// client of conns connections: pendingShards over the client's
// connections, and, over the process's (liveWires), at most four times as
// many in all, at least one each. Callers spread over the connections meet
// on each the fewer; and a client of many connections, or a process of
// many clients (a load generator's thousands), does not hold a table of
// many shards on each: at 10,000 connections, one shard each took 2.4 KiB
// a connection off the load generator's heap, and took the reader's look
// at whether calls wait (mustListen) from eight cache lines to one.
func pendingShardsFor(conns int) int { return shardsFor(conns, int(liveWires.Load())+1) }

// shardsFor is pendingShardsFor with live connections in the process, the
// new one among them.
func shardsFor(conns, live int) int {
	s := pendingShards
	for s > 1 && (s*conns > pendingShards || s*live > 4*pendingShards) {
		s /= 2
	}
	return s
}

// liveWires counts the process's client connections that have not failed
// (newWire, fail).
var liveWires atomic.Int64

// register gives cl a call id and enters it in the pending table.
func (w *wire) register(cl *call) (uint32, error) {
	id := w.pending.Add(cl, &cl.id)
	if id == 0 {
		return 0, w.failure()
	}
	return id, nil
}

// newID returns an id for a one-way call, which never waits for a reply.
func (w *wire) newID() uint32 { return w.pending.FreeID() }

// take removes the call with id from the table; nil if it is not there.
// Whoever takes a call completes it.
func (w *wire) take(id uint32) *call { return w.pending.Take(id) }

// forget removes cl from the table if it is still there and reports whether
// it was: the caller now owns its completion.
func (w *wire) forget(cl *call) bool { return w.pending.Forget(cl.id, cl) }

// abandon tells the server the caller of id stopped waiting, and closes the
// wire if it was only kept open for that call.
func (w *wire) abandon(id uint32) {
	w.enqueueAsync(proto.AppendCancel(nil, id)) // never block a caller whose time is up
	w.closeIfIdle()
}

// enqueueRequest sends a Request, OneWay or Publish frame, encoding it in
// place, its payload compressed if the wire compresses calls. A caller
// that writes itself stops writing at deadline (if not zero) and leaves
// the rest to the writer goroutine, so a server that stops reading cannot
// hold it past its deadline. The payload is in the kernel, or copied to the
// write queue, when it returns.
func (w *wire) enqueueRequest(h proto.Header, route string, md proto.Metadata, payload []byte, deadline time.Time) error {
	if w.zip != proto.CompressionNone && len(payload) >= w.zipMin && h.Kind != proto.KindPublish {
		return w.enqueueCompressed(h, route, md, payload, deadline)
	}
	return w.enqueue(h, route, md, payload, deadline)
}

// enqueueCall queues the Request of an asynchronous call, encoded in place,
// its payload compressed if the wire compresses calls, and never writes on
// the calling goroutine (a done function on the reader's): within a batch
// (beginBatch) its end sends it, else the writer goroutine does, with
// whatever else is queued by then. h is its caller's: its compression is
// set here, and it is copied into the frame under the lock.
func (w *wire) enqueueCall(h *proto.Header, route string, md proto.Metadata, payload []byte) {
	var z zipped
	if w.zip != proto.CompressionNone && len(payload) >= w.zipMin {
		payload, z = w.compress(payload)
		h.Flags = h.Flags.WithCompression(z.as)
	}
	w.wmu.Lock()
	if w.dead() || w.broken.Load() {
		w.wmu.Unlock() // the wire completes the call with its failure
	} else {
		w.wbuf = proto.AppendFrame(w.wbuf, *h, route, md, payload)
		w.queuedLocked()
	}
	z.release()
}

// compress returns payload as a call's goes on w, which compresses calls
// of its size: compressed where that makes it smaller, z.as saying how
// (the flags' compression). The compressed bytes live in a pooled buffer
// until release.
func (w *wire) compress(payload []byte) ([]byte, zipped) {
	bp := compression.GetBuffer()
	z := zipped{bp: bp, z: compression.Append(*bp, payload, w.zip)}
	if len(z.z) < len(payload) {
		z.as = w.zip
		return z.z, z
	}
	return payload, z
}

// zipped is a payload compressed into a pooled buffer (compress).
type zipped struct {
	bp *[]byte
	z  []byte
	as proto.Compression // how the payload went: CompressionNone if not compressed
}

// release gives the buffer back; nothing for the zero zipped.
func (z zipped) release() {
	if z.bp != nil {
		compression.PutBuffer(z.bp, z.z)
	}
}

// queuedLocked ends a hand-over of frames to the queue, with wmu held, and
// unlocks it: the batch's end, the end of a Batch or a write in progress
// sends them; else they are sent now (sendQueuedLocked).
func (w *wire) queuedLocked() {
	if w.batching || w.held > 0 || w.flushing {
		w.wmu.Unlock()
		return
	}
	w.sendQueuedLocked()
}

// sendQueuedLocked sends the queue, with wmu held and no write in
// progress, and unlocks wmu: at once, with a raw system call, as far as the
// socket takes it without waiting; the rest, if any, by a writer goroutine.
// It never waits for the socket, so any goroutine may call it: the reader
// at a batch's end (a reader that waited could deadlock with a server
// waiting to write to it), a done function starting a call.
func (w *wire) sendQueuedLocked() {
	w.flushing = true
	if w.raw == nil && w.loop == nil || w.broken.Load() {
		w.wmu.Unlock()
		w.kickWriter()
		return
	}
	buf := w.takeLocked()
	w.wmu.Unlock()
	n, err := w.writeNow(buf)
	w.wmu.Lock()
	if err == nil && n < len(buf) {
		w.wbuf = append(buf[n:len(buf):len(buf)], w.wbuf...)
		w.handOffLocked()
		return
	}
	w.recycleLocked(buf)
	_ = w.wroteLocked(err)
}

// hold counts a Batch in (+1) or out (-1); the last out sends what waits.
func (w *wire) hold(d int32) {
	w.wmu.Lock()
	w.held += d
	if d > 0 || len(w.wbuf) == 0 {
		w.wmu.Unlock()
		return
	}
	w.queuedLocked()
}

// enqueueCompressed is enqueueRequest for a payload to compress: it goes
// compressed if that makes it smaller.
func (w *wire) enqueueCompressed(h proto.Header, route string, md proto.Metadata, payload []byte, deadline time.Time) error {
	payload, z := w.compress(payload)
	h.Flags = h.Flags.WithCompression(z.as)
	err := w.enqueue(h, route, md, payload, deadline)
	z.release()
	return err
}

// enqueue is enqueueRequest with the payload as it is to go.
func (w *wire) enqueue(h proto.Header, route string, md proto.Metadata, payload []byte, deadline time.Time) error {
	w.wmu.Lock()
	if w.dead() || w.broken.Load() {
		w.wmu.Unlock()
		return w.unsent()
	}
	if len(payload) >= bigPayload {
		if !w.flushing && !w.batching && w.held == 0 {
			return w.writeBig(h, route, md, payload, deadline)
		}
		w.roomLocked(proto.HeaderSize + len(route) + len(md) + len(payload))
	}
	w.wbuf = proto.AppendFrame(w.wbuf, h, route, md, payload)
	if w.batching || w.held > 0 {
		w.wmu.Unlock() // the batch's end sends it
		return nil
	}
	return w.flushLocked(deadline)
}

// bigPayload is the size from which a request's payload is written from
// the caller's own slice, with writev, instead of being copied into the
// write queue first.
const bigPayload = 64 << 10

// writeBig writes, with wmu held and no write in progress, whatever is
// queued, then the frame's head, then its payload straight from the
// caller's slice, in one writev; it unlocks wmu. The payload is in the
// kernel, or copied to the writer's queue, when it returns.
func (w *wire) writeBig(h proto.Header, route string, md proto.Metadata, payload []byte, deadline time.Time) error {
	w.flushing = true
	w.wbuf = proto.AppendHead(w.wbuf, h, route, md, len(payload))
	head := w.takeLocked()
	w.wmu.Unlock()
	w.setWriteDeadline(deadline)
	var n int64
	var err error
	if w.loop != nil {
		n, err = w.writeBoth(head, payload)
	} else {
		bufs := net.Buffers{head, payload}
		n, err = bufs.WriteTo(w.nc)
	}
	w.wmu.Lock()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The caller's time is up; the writer sends the rest, which must
		// not point into the caller's payload any more.
		var rest []byte
		if int(n) < len(head) {
			rest = append(head[n:len(head):len(head)], payload...)
		} else {
			rest = append([]byte(nil), payload[int(n)-len(head):]...)
		}
		w.wbuf = append(rest, w.wbuf...)
		return w.handOffLocked()
	}
	w.recycleLocked(head)
	return w.wroteLocked(err)
}

// enqueueAsync queues a frame for the writer goroutine and never writes on
// the calling goroutine: the reader answers Pings with it, and a reader
// blocked in a write could deadlock with a server blocked writing to it.
func (w *wire) enqueueAsync(frame []byte) {
	w.wmu.Lock()
	if w.dead() || w.broken.Load() {
		w.wmu.Unlock()
		return
	}
	w.wbuf = append(w.wbuf, frame...)
	if w.flushing {
		w.wmu.Unlock()
		return
	}
	w.flushing = true
	w.wmu.Unlock()
	w.kickWriter()
}

// flushLocked sends what is queued, with wmu held, and unlocks it. If no
// write is in progress, the calling goroutine writes itself: a lone call
// costs no goroutine hand-off. If one is, the frames wait for it. Frames
// queued while this goroutine writes go to the writer goroutine, which
// sends them all in one write: under load, one hand-off carries many calls.
func (w *wire) flushLocked(deadline time.Time) error {
	if w.flushing {
		w.wmu.Unlock()
		return nil
	}
	w.flushing = true
	w.wmu.Unlock()
	// While someone reads the connection, other calls are in flight, and
	// callers just woken by their replies may be about to send: let them
	// queue their frames first, so that one write carries them all. A
	// caller that finds no one reading is alone, and will read its own
	// reply: it does not yield, since a yield wakes an idle thread to look
	// for work (a futex call to wake it and one as it sleeps again).
	if w.rd.tok.Load() {
		runtime.Gosched()
	}
	w.wmu.Lock()
	buf := w.takeLocked()
	w.wmu.Unlock()
	n, err := w.write(buf, deadline)
	w.wmu.Lock()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The caller's time is up; what it did not write goes first to the
		// writer, which writes without a deadline.
		w.wbuf = append(buf[n:len(buf):len(buf)], w.wbuf...)
		return w.handOffLocked()
	}
	w.recycleLocked(buf)
	return w.wroteLocked(err)
}

// write writes buf for the goroutine that is flushing, by deadline (none
// if zero): with a raw system call first where the socket has one, which
// takes a small write whole without the scheduler's system call
// bookkeeping, then through the connection for what is left.
func (w *wire) write(buf []byte, deadline time.Time) (int, error) {
	n := 0
	if w.raw != nil || w.loop != nil {
		var err error
		if n, err = w.writeNow(buf); err != nil || n == len(buf) {
			return n, err
		}
	}
	w.setWriteDeadline(deadline)
	if w.loop != nil {
		m, err := w.loopWrite(buf[n:], w.wdeadline)
		return n + m, err
	}
	m, err := w.nc.Write(buf[n:])
	return n + m, err
}

// writeNow writes buf as far as the socket takes it without waiting.
func (w *wire) writeNow(buf []byte) (int, error) {
	if w.loop != nil {
		return w.loopWriteNow(buf)
	}
	return w.raw.writeNow(buf)
}

// writeBoth writes head, then payload, for writeBig on a loop's socket.
func (w *wire) writeBoth(head, payload []byte) (int64, error) {
	n, err := w.loopWrite(head, w.wdeadline)
	if err != nil {
		return int64(n), err
	}
	m, err := w.loopWrite(payload, w.wdeadline)
	return int64(n + m), err
}

// handOffLocked gives the queue, with the rest of a caller's cut-off
// write in front, to the writer goroutine, and unlocks wmu.
func (w *wire) handOffLocked() error {
	w.wmu.Unlock()
	w.kickWriter()
	return nil
}

// wroteLocked ends a caller's write, with wmu held, and unlocks it: an
// error breaks the wire (writeFailed); frames queued during the write go to
// the writer.
func (w *wire) wroteLocked(err error) error {
	if err != nil {
		w.flushing = false
		w.wmu.Unlock()
		w.writeFailed(err)
		return nil // the wire completes every call with the failure
	}
	if len(w.wbuf) == 0 {
		w.flushing = false
		w.wmu.Unlock()
		return nil
	}
	w.wmu.Unlock()
	w.kickWriter() // flushing stays set: the writer owns the queue now
	return nil
}

// setWriteDeadline sets the connection's write deadline for the flushing
// goroutine, touching the socket only when it changes.
func (w *wire) setWriteDeadline(t time.Time) {
	if t.IsZero() && !w.wdl {
		return
	}
	if w.loop != nil {
		w.wdeadline = t
	} else {
		_ = w.nc.SetWriteDeadline(t)
	}
	w.wdl = !t.IsZero()
}

// takeLocked takes the queued frames, leaving an empty queue.
func (w *wire) takeLocked() []byte {
	buf := w.wbuf
	w.wbuf, w.spare = w.spare[:0], nil
	return buf
}

// keepBuf is the largest write buffer a wire keeps for itself; larger ones,
// which large frames queued behind a write grow, go to bigBufs.
const keepBuf = 1 << 20

// bigBufs holds written buffers larger than keepBuf, for whichever wire
// next queues large frames behind a write: kept by each wire they would
// hold megabytes per connection, and dropped, each large frame queued
// would allocate and fault in a new one (a tenth of the calls with four
// 1 MiB calls in flight on one connection).
var bigBufs sync.Pool // of *[]byte

// recycleLocked keeps a written buffer for reuse: as the wire's spare, or,
// if a large frame grew it, in bigBufs, unless it is larger than any frame
// the wire may send twice over.
func (w *wire) recycleLocked(buf []byte) {
	switch {
	case cap(buf) <= keepBuf:
		w.spare = buf[:0]
	case cap(buf) <= 2*w.lim.MaxFrameSize:
		p := new([]byte) // not &buf: that would move buf to the heap on every call
		*p = buf[:0]
		bigBufs.Put(p)
	}
}

// roomLocked makes room in the queue for a large frame of n bytes, from
// bigBufs when a buffer there holds the queue and the frame.
func (w *wire) roomLocked(n int) {
	need := len(w.wbuf) + n
	if need <= cap(w.wbuf) {
		return
	}
	p, _ := bigBufs.Get().(*[]byte)
	if p == nil || cap(*p) < need {
		return // append grows the queue; the buffer found, too small, goes to the collector
	}
	w.wbuf = append((*p)[:0], w.wbuf...)
}

// dead reports whether w has failed: one load, where a receive from
// w.done would lock the channel, on every call.
func (w *wire) dead() bool { return w.failed.Load() }

// kickWriter hands the queue to a writer goroutine, which the caller's
// ownership of the write (flushing) passes to: it writes what is queued,
// and what is queued meanwhile, and ends once the queue is empty. So a
// connection keeps no writer while it has nothing to write (one of the
// thousands a load generator opens saves its goroutine), and most writes
// are the callers' and the reader's own. A wire that has failed starts
// none: its queue is never sent.
func (w *wire) kickWriter() {
	w.pmu.Lock()
	if w.err != nil {
		w.pmu.Unlock()
		return
	}
	w.wg.Add(1) // before fail: the listener still counts in w.wg
	w.pmu.Unlock()
	go w.writeLoop()
}

// writeLoop sends the frames handed to it, and those queued while it
// writes, until the queue is empty; then it gives the writing back to the
// callers, and ends.
func (w *wire) writeLoop() {
	defer w.wg.Done()
	w.wmu.Lock()
	w.setWriteDeadline(time.Time{})
	for len(w.wbuf) > 0 && !w.dead() {
		buf := w.takeLocked()
		w.wmu.Unlock()
		_, err := w.write(buf, time.Time{})
		w.wmu.Lock()
		w.recycleLocked(buf)
		if err != nil {
			w.flushing = false
			w.wmu.Unlock()
			w.writeFailed(err)
			return
		}
	}
	w.flushing = false
	w.wmu.Unlock()
}

// writeFailed acts on a failed write. The connection is lost, but what the
// server sent before it closed its end (a GoAway naming the last call it
// took in, replies) is still to be read, and decides which calls may be
// sent again: failing the wire now would call all of them unknown. So the
// wire takes no more frames, and is failed by its read side, which reads
// up to the close (someone is made to read) and then fails.
func (w *wire) writeFailed(err error) {
	w.pmu.Lock()
	if w.werr == nil {
		w.werr = err
	}
	w.pmu.Unlock()
	w.broken.Store(true)
	w.needRead()
}

// unsent is the error of a frame not sent because the wire is lost.
func (w *wire) unsent() error {
	w.pmu.Lock()
	werr := w.werr
	w.pmu.Unlock()
	if w.dead() || werr == nil {
		return w.failure()
	}
	return &handler.Error{Code: proto.CodeUnavailable, Message: "connection lost: " + strings.TrimPrefix(werr.Error(), "rpcd: "), Unprocessed: true}
}

// handle acts on one whole frame from the server.
func (w *wire) handle(f *proto.Frame) {
	if (f.Kind == proto.KindResponse || f.Kind == proto.KindError) && f.ID != 0 && w.pipeReply(f) {
		return
	}
	w.endPipes() // a pipe's done functions run with it held, and no one else's
	switch f.Kind {
	case proto.KindResponse, proto.KindError:
		if f.Kind == proto.KindError && f.ID == 0 { // a Publish of this client's, refused
			w.srv.publishRefused(f)
			return
		}
		if cl := w.take(f.ID); cl != nil {
			w.stamp(cl)
			var err error
			cl.reply, err = engine.Answer(f, cl.reply, w.lim.MaxFrameSize)
			w.rd.woke = w.rd.woke || cl.fut == nil && !cl.async() && cl != w.rd.own // another caller waits on it
			cl.finish(err)
		}
	case proto.KindPing:
		w.enqueueAsync(proto.AppendPong(nil, f.Payload))
	case proto.KindGoAway:
		last, code, msg := f.GoAwayBody()
		w.pmu.Lock()
		w.goAwayID = last
		if code != proto.CodeOK && code != proto.CodeUnavailable {
			// A refusal (Unauthenticated, ResourceExhausted, ...) is what
			// the calls it excluded fail with, rather than a lost connection.
			w.goAwayErr = &handler.Error{Code: code, Message: string(msg), Unprocessed: true}
		}
		w.pmu.Unlock()
		if !w.goingAway.Swap(true) {
			close(w.away) // only this goroutine closes it
		}
		w.closeIfIdle()
	case proto.KindRequest, proto.KindOneWay:
		w.serve(f) // a reverse call or a push: Options.Handler, Options.Pushes
	case proto.KindCancel:
		w.cancelServed(f.ID)
	case proto.KindStreamOpen, proto.KindStreamData, proto.KindStreamCredit, proto.KindStreamEnd, proto.KindStreamReset:
		w.handleStream(f)
	case proto.KindMessage:
		w.srv.subs.deliver(f, w.lim.MaxFrameSize)
	case proto.KindUnsubscribe:
		w.srv.subs.ended(f)
	case proto.KindSubscribe, proto.KindPublish, proto.KindHello, proto.KindWelcome:
		// A client's frames (docs/protocol.md, "Publish and subscribe");
		// the handshake's, whose Welcome came before the wire began.
		err := protocolError("a " + f.Kind.String() + " frame from the server")
		w.goAwayAndClose(err)
		w.fail(err)
	case proto.KindPong:
	}
}

// closeIfIdle closes a wire the server is going away from once no call
// waits on it.
func (w *wire) closeIfIdle() {
	if !w.goingAway.Load() {
		return
	}
	if !w.pending.Waiting() && !w.pipesWaiting() && w.servedIdle() && w.streams.Open() == 0 {
		w.fail(errGoAway)
	}
}

var errGoAway = errors.New("rpcd: server sent go-away")

// movedOn reports whether the server sent w away after serving it: a
// GoAway that goes away (Unavailable, a drain or the connection's maximum
// age, rather than a refusal such as ResourceExhausted) and that names a
// call the server took in, or that came after w's first second. One that
// came at once, naming none, is a refusal (a draining server's to a new
// connection), after which the reconnection backoff grows.
func (w *wire) movedOn() bool {
	if !w.goingAway.Load() {
		return false
	}
	w.pmu.Lock()
	defer w.pmu.Unlock()
	return w.goAwayErr == nil && (w.goAwayID != 0 || time.Since(w.born) > time.Second)
}

func protocolError(msg string) error {
	return &handler.Error{Code: proto.CodeInternal, Message: "protocol error: " + msg}
}

// goAwayAndClose tells the server why its bytes are refused.
func (w *wire) goAwayAndClose(err error) {
	if w.loop != nil {
		_, _ = w.loopWriteNow(proto.AppendGoAway(nil, 0, proto.CodeInternal, handler.MessageOf(err)))
		return
	}
	_ = w.nc.SetWriteDeadline(time.Now().Add(time.Second)) // best effort: the wire is closing
	_, _ = w.nc.Write(proto.AppendGoAway(nil, 0, proto.CodeInternal, handler.MessageOf(err)))
}

// fail breaks the wire: it closes the connection and fails every pending
// call with Unavailable. Calls the server's GoAway excluded from processing
// are marked Unprocessed.
func (w *wire) fail(cause error) {
	w.pmu.Lock()
	if w.err != nil {
		w.pmu.Unlock()
		return
	}
	msg := "connection lost"
	if cause == errGoAway {
		msg = "server went away"
	} else if cause != nil && !errors.Is(cause, net.ErrClosed) {
		msg += ": " + strings.TrimPrefix(cause.Error(), "rpcd: ")
	}
	w.err = &handler.Error{Code: proto.CodeUnavailable, Message: msg, Unprocessed: true}
	goneAway, last, refused := w.goingAway.Load(), w.goAwayID, w.goAwayErr
	w.failed.Store(true)
	close(w.done)
	w.pmu.Unlock()
	liveWires.Add(-1)
	asyncSweeps.remove(w)
	pending := w.pending.Close()
	w.failPipes(msg, goneAway, last, refused)
	w.cancelAllServed()
	w.streams.Close()

	if w.loop != nil {
		w.loopShutdown() // its loop reads the end and lets go of the socket
	} else {
		_ = w.nc.Close()
	}
	for id, cl := range pending {
		cl.finish(lostCall(id, msg, goneAway, last, refused))
	}
}

// lostCall is the error of call id on a wire that failed with msg: refused
// for a call the server's GoAway excluded when it refused them, else
// Unavailable, marked Unprocessed for a call a GoAway (of last) excluded.
// A table's call and a pipe's fail alike.
func lostCall(id uint32, msg string, goneAway bool, last uint32, refused *handler.Error) error {
	if refused != nil && proto.After(id, last) {
		return refused
	}
	return &handler.Error{Code: proto.CodeUnavailable, Message: msg, Unprocessed: goneAway && proto.After(id, last)}
}

// failure returns the error that broke the wire.
func (w *wire) failure() error {
	w.pmu.Lock()
	defer w.pmu.Unlock()
	if w.err == nil {
		return &handler.Error{Code: proto.CodeUnavailable, Message: "connection lost"}
	}
	return w.err
}

// close fails the wire and waits for its goroutines.
func (w *wire) close(cause error) {
	w.fail(cause)
	w.wg.Wait()
}

// heardReader reads the connection and marks that bytes came, for the
// keep-alive watch. The mark costs a load per read from the socket (which
// under load brings many frames), and a store at the first read after each
// of the watch's looks: no clock is read on the way of a reply.
type heardReader struct {
	w   *wire
	src io.Reader // the connection, or its raw reader
}

func (r *heardReader) Read(p []byte) (int, error) {
	n, err := r.src.Read(p)
	if n > 0 && !r.w.heard.Load() {
		r.w.heard.Store(true)
	}
	return n, err
}

// aliveState is what the client's keep-alive watch knows of a wire; the
// watch's alone.
type aliveState struct {
	last    time.Time // when it last saw that bytes had come; zero before its first look
	pinged  time.Time // when the unanswered Ping went out
	waiting bool      // a Ping is out and nothing has come since
}

// checkAlive is the keep-alive watch's look at w at now: once w has read
// nothing for every, it sends a Ping, through the writer goroutine; if
// nothing at all arrives within timeout of the Ping, it fails w, which
// fails w's calls and has its slot redial.
func (w *wire) checkAlive(now time.Time, every, timeout time.Duration) {
	a := &w.alive
	if a.last.IsZero() || w.heard.Swap(false) {
		a.last, a.waiting = now, false
	}
	switch {
	case a.waiting && now.Sub(a.pinged) >= timeout:
		w.fail(fmt.Errorf("no frame within %v of a keep-alive ping", timeout))
	case !a.waiting && now.Sub(a.last) >= every:
		a.pinged, a.waiting = now, true
		w.enqueueAsync(proto.AppendPing(nil, nil))
	}
}
