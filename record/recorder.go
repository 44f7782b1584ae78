package record

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/proto"
)

// The writer's queue: records waiting for the writer goroutine, bounded in
// number and in bytes. A tap method that finds it full drops its record
// and counts it in Stats.Lost.
const (
	queueLen   = 8192
	queueBytes = 64 << 20
	// flushAfter is how long written records may wait in the writer's
	// buffer while nothing new comes.
	flushAfter = 100 * time.Millisecond
	// keepBuf bounds the buffer a pooled item keeps.
	keepBuf = 64 << 10
)

// Stats is what a recording holds so far, or held when it ended.
type Stats struct {
	Conns  int64     `json:"conns"`  // connections recorded (open records)
	Calls  int64     `json:"calls"`  // calls, streams, subscriptions and publishes recorded
	Frames int64     `json:"frames"` // frames recorded
	Bytes  int64     `json:"bytes"`  // bytes of the file, its header included
	Lost   int64     `json:"lost"`   // records the full queue dropped, and frames past max_frame
	Ended  EndReason `json:"ended"`  // why it ended; EndNone while it runs
}

// Recorder writes a recording from the frames its tap methods are given.
// It implements handler/transport's Tap: its methods never block, keep no
// slice they are given, and are safe for concurrent use.
type Recorder struct {
	o        Options
	start    time.Time
	limits   proto.Limits
	wantIn   [256]uint8 // what the tap copies of a frame the client sent, by kind
	wantOut  [256]uint8 // of one the server sent
	queue    chan *item
	queued   atomic.Int64 // bytes in the queue
	closing  atomic.Bool  // the tap takes nothing more
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	err      error // the writer's failure; read after done is closed

	conns, calls, frames, bytes, lost atomic.Int64
	ended                             atomic.Uint32

	// The writer goroutine's own.
	w       *bufio.Writer
	file    *os.File // Create's file, closed at the end
	track   *conns
	buf     []byte // the record being written
	expand  []byte // an expanded payload
	redact  []byte // a replaced payload
	written int64
}

var _ transport.Tap = (*Recorder)(nil)

// What a tap method copies of a frame.
const (
	skip  = 0 // nothing: the frame is never recorded
	head  = 1 // its header: the writer follows the calls with it
	whole = 2
)

// item is one record for the writer: a frame's copy, or a connection's
// open (buf holds its remote address) or close.
type item struct {
	typ  EntryType
	out  bool
	head bool
	conn uint64
	at   time.Duration
	buf  []byte
}

var items = sync.Pool{New: func() any { return &item{buf: make([]byte, 0, 512)} }}

// Create starts a recording into a new file at path, made with mode 0600;
// it refuses a path that exists. Its writer goroutine runs until Stop, or
// until Options.Duration or MaxBytes ends the recording: call Stop in any
// case, to release it and learn how the file ended.
func Create(path string, o Options) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, errorf("%w", err)
	}
	r, err := start(f, o)
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	r.file = f
	return r, nil
}

// New starts a recording into w, which it does not close. It writes the
// file's header before it returns. As with Create, call Stop.
func New(w io.Writer, o Options) (*Recorder, error) { return start(w, o) }

func start(w io.Writer, o Options) (*Recorder, error) {
	o, err := o.validate()
	if err != nil {
		return nil, err
	}
	r := &Recorder{
		o: o, start: time.Now(), limits: proto.Limits{MaxFrameSize: proto.DefaultMaxFrameSize}.WithDefaults(),
		queue: make(chan *item, queueLen), stop: make(chan struct{}), done: make(chan struct{}),
		w: bufio.NewWriterSize(w, 256<<10), track: newConns(o.Routes, o.Answers),
	}
	r.track.all = len(o.Routes) == 0 && len(o.Redact) == 0 && !o.Answers
	r.wants()
	h := Header{Version: FormatVersion, Start: r.start, Source: o.Source, Server: o.Server, MaxFrame: r.limits.MaxFrameSize, Options: o}
	if r.buf, err = appendFileHeader(r.buf, &h); err != nil {
		return nil, err
	}
	if _, err := w.Write(r.buf); err != nil {
		return nil, errorf("writing the file header: %w", err)
	}
	r.written = int64(len(r.buf))
	r.bytes.Store(r.written)
	go r.run()
	return r, nil
}

// wants fills in what the tap copies of each kind (docs/recording.md,
// "What is recorded"): the client's calls, cancels, pub/sub and stream
// frames whole; the server's answers whole with Answers, else only the
// headers of those that end a call, a stream or a subscription; none of
// the server's when every call is recorded as it came (no route filter, no
// redaction, no answers), as nothing then needs following.
func (r *Recorder) wants() {
	for _, k := range []proto.Kind{proto.KindRequest, proto.KindOneWay, proto.KindCancel, proto.KindPublish, proto.KindSubscribe,
		proto.KindUnsubscribe, proto.KindStreamOpen, proto.KindStreamData, proto.KindStreamCredit, proto.KindStreamEnd, proto.KindStreamReset} {
		r.wantIn[k] = whole
	}
	if r.track.all { // no call to follow: the server's frames are not needed
		return
	}
	for _, k := range []proto.Kind{proto.KindResponse, proto.KindError, proto.KindStreamEnd, proto.KindStreamReset, proto.KindUnsubscribe} {
		r.wantOut[k] = head
	}
	if r.o.Answers {
		for _, k := range []proto.Kind{proto.KindResponse, proto.KindError, proto.KindMessage, proto.KindStreamData, proto.KindStreamCredit, proto.KindStreamEnd, proto.KindStreamReset} {
			r.wantOut[k] = whole
		}
	}
}

// TapOpen starts recording connection conn, unless the recording has
// ended or the sample leaves conn out (Sampled): then it returns false.
func (r *Recorder) TapOpen(conn uint64, remote net.Addr) bool {
	if r.closing.Load() || !Sampled(conn, r.o.Sample) {
		return false
	}
	it := items.Get().(*item)
	it.buf = it.buf[:0]
	if remote != nil {
		it.buf = append(it.buf, remote.String()...)
	}
	r.enqueue(it, EntryOpen, conn, false, false)
	return true
}

// TapFrame records a copy of frame, which conn received (out false) or
// sent (out true), if it is of a kind recorded; the writer decides the
// rest.
func (r *Recorder) TapFrame(conn uint64, out bool, frame []byte) {
	if len(frame) < proto.HeaderSize {
		return
	}
	want := r.wantIn[frame[3]]
	if out {
		want = r.wantOut[frame[3]]
	}
	if want == skip || r.closing.Load() {
		return
	}
	if want == head {
		frame = frame[:proto.HeaderSize]
	} else if len(frame) > r.limits.MaxFrameSize { // a server that takes larger frames than a record holds
		r.lost.Add(1)
		return
	}
	if r.queued.Load()+int64(len(frame)) > queueBytes {
		r.lost.Add(1)
		return
	}
	it := items.Get().(*item)
	it.buf = append(it.buf[:0], frame...)
	r.enqueue(it, EntryFrame, conn, out, want == head)
}

// TapClose records that conn closed, or that it is recorded no more.
func (r *Recorder) TapClose(conn uint64) {
	if r.closing.Load() {
		return
	}
	it := items.Get().(*item)
	it.buf = it.buf[:0]
	r.enqueue(it, EntryClose, conn, false, false)
}

// enqueue stamps it and queues it for the writer, or drops it if the queue
// is full.
func (r *Recorder) enqueue(it *item, t EntryType, conn uint64, out, head bool) {
	it.typ, it.conn, it.out, it.head, it.at = t, conn, out, head, time.Since(r.start)
	n := int64(len(it.buf))
	r.queued.Add(n)
	select {
	case r.queue <- it:
	default:
		r.queued.Add(-n)
		r.lost.Add(1)
		free(it)
	}
}

// free gives an item back to the pool.
func free(it *item) {
	if cap(it.buf) <= keepBuf {
		items.Put(it)
	}
}

// Stop ends the recording: the records queued are written, then a close
// record for each connection still open and the end record; the file is
// flushed and, if Create made it, closed. It returns the recording's
// figures and the first error writing it met. Stop may be called more than
// once, and after the recording ended by itself.
func (r *Recorder) Stop() (Stats, error) {
	r.stopOnce.Do(func() { close(r.stop) })
	<-r.done
	return r.Stats(), r.err
}

// Done is closed once the recording has ended and its file is complete:
// after Stop, Options.Duration, Options.MaxBytes or a write failure.
func (r *Recorder) Done() <-chan struct{} { return r.done }

// Stats returns the recording's figures so far.
func (r *Recorder) Stats() Stats {
	return Stats{Conns: r.conns.Load(), Calls: r.calls.Load(), Frames: r.frames.Load(), Bytes: r.bytes.Load(),
		Lost: r.lost.Load(), Ended: EndReason(r.ended.Load())}
}

// Options returns the recording's options, their defaults set.
func (r *Recorder) Options() Options { return r.o }

// run is the writer goroutine.
func (r *Recorder) run() {
	defer close(r.done)
	var limit <-chan time.Time
	if r.o.Duration > 0 {
		t := time.NewTimer(r.o.Duration)
		defer t.Stop()
		limit = t.C
	}
	flush := time.NewTimer(time.Hour)
	flush.Stop()
	defer flush.Stop()
	armed := false // flush is set: what is buffered is written within flushAfter
	for {
		select {
		case it := <-r.queue:
			r.handle(it)
			// What else is queued, without a select each.
			for n := len(r.queue); n > 0 && r.ended.Load() == 0; n-- {
				r.handle(<-r.queue)
			}
			if !armed && r.w.Buffered() > 0 {
				flush.Reset(flushAfter)
				armed = true
			}
		case <-flush.C:
			armed = false
			if err := r.w.Flush(); err != nil {
				r.fail(err)
			}
		case <-limit:
			r.end(EndDuration)
		case <-r.stop:
			r.closing.Store(true)
			for n := len(r.queue); n > 0 && r.ended.Load() == 0; n-- {
				r.handle(<-r.queue)
			}
			r.end(EndStopped)
		}
		if r.ended.Load() != 0 {
			return
		}
	}
}

// handle writes the record for it, if any, and frees it.
func (r *Recorder) handle(it *item) {
	r.queued.Add(-int64(len(it.buf)))
	defer free(it)
	if r.ended.Load() != 0 {
		return
	}
	switch it.typ {
	case EntryOpen:
		if _, fresh := r.track.get(it.conn); fresh {
			r.write(appendOpen(r.buf[:0], it.at, it.conn, string(it.buf)), EntryOpen, false)
		}
	case EntryClose:
		if _, ok := r.track.m[it.conn]; ok {
			delete(r.track.m, it.conn)
			r.write(appendClose(r.buf[:0], it.at, it.conn), EntryClose, false)
		}
	case EntryFrame:
		r.frame(it)
	}
}

// frame writes the record of a frame the tap copied, if it is recorded.
func (r *Recorder) frame(it *item) {
	var f proto.Frame
	if it.head {
		h, err := proto.DecodeHeader(it.buf, &r.limits)
		if err != nil {
			return
		}
		f.Header = h
	} else if n, err := f.Decode(it.buf, &r.limits); err != nil || n != len(it.buf) {
		return
	}
	c, fresh := r.track.get(it.conn)
	if fresh { // its open record was lost
		r.write(appendOpen(r.buf[:0], it.at, it.conn, ""), EntryOpen, false)
	}
	rec, route, starts := r.track.decide(c, &f.Header, f.Route, it.out)
	if !rec || it.head {
		return
	}
	h, payload := f.Header, f.Payload
	if comp := h.Flags.Compression(); comp != proto.CompressionNone {
		// A payload that does not expand is kept as it came, compressed.
		if b, err := compression.Expand(r.expand[:0], payload, comp, h.PayloadRoom(r.limits.MaxFrameSize)); err == nil {
			r.expand, payload = b, b
			h.Flags = h.Flags.WithCompression(proto.CompressionNone)
		}
	}
	n, act := len(payload), Keep
	if ok, keep := userPayload(h.Kind); ok {
		if rule := redaction(r.o.Redact, route); rule != nil && rule.Action != Keep {
			act, keep = rule.Action, min(keep, len(payload))
			h.Flags = h.Flags.WithCompression(proto.CompressionNone)
			r.redact = append(r.redact[:0], payload[:keep]...)
			if act == Replace {
				r.redact = append(r.redact, rule.With...)
			}
			payload = r.redact
		}
	}
	r.write(appendFrame(r.buf[:0], it.at, it.conn, it.out, act, n, h, f.Route, f.Metadata, payload), EntryFrame, starts)
}

// write writes the record rec of type t, unless it would take the file
// past MaxBytes: then the recording ends.
func (r *Recorder) write(rec []byte, t EntryType, starts bool) {
	r.buf = rec
	if r.written+int64(len(rec))+RecordPrefixSize+endBodySize+int64(len(r.track.m))*(RecordPrefixSize+RecordHeadSize) > r.o.MaxBytes {
		r.end(EndMaxBytes)
		return
	}
	r.put(rec)
	switch t {
	case EntryOpen:
		r.conns.Add(1)
	case EntryFrame:
		r.frames.Add(1)
		if starts {
			r.calls.Add(1)
		}
	}
}

// put writes b, counting it.
func (r *Recorder) put(b []byte) {
	if r.ended.Load() == uint32(EndFailed) {
		return
	}
	if _, err := r.w.Write(b); err != nil {
		r.fail(err)
		return
	}
	r.written += int64(len(b))
	r.bytes.Store(r.written)
}

// fail ends the recording on a write error.
func (r *Recorder) fail(err error) {
	if r.err == nil {
		r.err = errorf("writing the recording: %w", err)
	}
	r.closing.Store(true)
	r.ended.Store(uint32(EndFailed))
	if r.file != nil {
		r.file.Close()
	}
}

// end writes a close record for each connection still open and the end
// record, flushes and closes the file.
func (r *Recorder) end(why EndReason) {
	r.closing.Store(true)
	if r.ended.Load() != 0 {
		return
	}
	at := time.Since(r.start)
	open := make([]uint64, 0, len(r.track.m))
	for conn := range r.track.m {
		open = append(open, conn)
	}
	slices.Sort(open)
	for _, conn := range open {
		r.put(appendClose(r.buf[:0], at, conn))
	}
	s := r.Stats()
	s.Ended = why
	r.put(appendEnd(r.buf[:0], at, &s))
	if err := r.w.Flush(); err != nil {
		r.fail(err)
		return
	}
	if r.file != nil {
		if err := r.file.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			r.fail(err)
			return
		}
	}
	r.ended.Store(uint32(why))
}

// String says what s counts, on one line: what rpcd record prints.
func (s Stats) String() string {
	return fmt.Sprintf("%d connections, %d calls, %d frames, %d bytes, %d lost, ended: %v", s.Conns, s.Calls, s.Frames, s.Bytes, s.Lost, s.Ended)
}
