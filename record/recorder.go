package record

import (
	"bufio"
	"encoding/binary"
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
	shards   [shards]shard
	queue    chan *shard   // shards that hold records, for the writer to take
	hurry    chan struct{} // a shard is filling: the writer takes now
	queued   atomic.Int64  // bytes the shards held when the writer last took or gave back
	closing  atomic.Bool   // the tap takes nothing more
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	err      error // the writer's failure; read after done is closed

	// Stats' figures: lost the tap's, the others the writer's as of the
	// batch it last wrote (publish).
	conns, calls, frames, bytes, lost atomic.Int64
	ended                             atomic.Uint32

	// The writer goroutine's own.
	counts  Stats // conns, calls and frames written so far
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
		queue: make(chan *shard, shards), hurry: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
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
	var addr string
	if remote != nil {
		if addr = remote.String(); len(addr) > MaxRemote {
			addr = addr[:MaxRemote]
		}
	}
	return r.push(conn, EntryOpen, 0, []byte(addr))
}

// TapFrame records a copy of frame, which conn received (out false) or
// sent (out true), if it is of a kind recorded; the writer decides the
// rest.
func (r *Recorder) TapFrame(conn uint64, out bool, frame []byte) {
	if len(frame) < proto.HeaderSize {
		return
	}
	want, flags := r.wantIn[frame[3]], byte(0)
	if out {
		want, flags = r.wantOut[frame[3]], flagOut
	}
	if want == skip || r.closing.Load() {
		return
	}
	if want == head {
		frame, flags = frame[:proto.HeaderSize], flags|flagHead
	} else if len(frame) > r.limits.MaxFrameSize { // a server that takes larger frames than a record holds
		r.lost.Add(1)
		return
	}
	r.push(conn, EntryFrame, flags, frame)
}

// TapClose records that conn closed, or that it is recorded no more.
func (r *Recorder) TapClose(conn uint64) {
	if r.closing.Load() {
		return
	}
	r.push(conn, EntryClose, 0, nil)
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

// Stats returns the recording's figures so far: the writer's as of the
// batch it last wrote.
func (r *Recorder) Stats() Stats {
	return Stats{Conns: r.conns.Load(), Calls: r.calls.Load(), Frames: r.frames.Load(), Bytes: r.bytes.Load(),
		Lost: r.lost.Load(), Ended: EndReason(r.ended.Load())}
}

// Options returns the recording's options, their defaults set.
func (r *Recorder) Options() Options { return r.o }

// run is the writer goroutine.
func (r *Recorder) run() {
	defer close(r.done)
	defer func() {
		for i := range r.shards {
			r.shards[i].shut()
		}
	}()
	var limit <-chan time.Time
	if r.o.Duration > 0 {
		t := time.NewTimer(r.o.Duration)
		defer t.Stop()
		limit = t.C
	}
	flush := time.NewTimer(time.Hour)
	flush.Stop()
	defer flush.Stop()
	pause := time.NewTimer(time.Hour)
	pause.Stop()
	defer pause.Stop()
	armed := false // flush is set: what is buffered is written within flushAfter
	var took time.Time
	for {
		select {
		case <-r.queue:
			// A shard holds records: let them gather until batchEvery after
			// the last take, unless a shard is filling.
			if wait := batchEvery - time.Since(took); wait > 0 {
				pause.Reset(wait)
				select {
				case <-pause.C:
				case <-r.hurry:
				case <-r.stop:
				}
				pause.Stop()
			}
			took = time.Now()
			r.drain(false)
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
			r.drain(true)
			r.end(EndStopped)
		}
		if r.ended.Load() != 0 {
			return
		}
	}
}

// handle writes the record rec a tap method queued, if it is recorded.
// rec is the writer's until drain gives its shard's batch back.
func (r *Recorder) handle(rec []byte) {
	at := time.Duration(binary.BigEndian.Uint64(rec[RecordPrefixSize+4:]))
	conn := binary.BigEndian.Uint64(rec[RecordPrefixSize+12:])
	switch flags := rec[RecordPrefixSize+1]; EntryType(rec[RecordPrefixSize]) {
	case EntryOpen:
		if _, fresh := r.track.get(conn); fresh {
			finishRecord(rec, 0)
			r.write(rec, EntryOpen, false)
		}
	case EntryClose:
		if r.track.forget(conn) {
			finishRecord(rec, 0)
			r.write(rec, EntryClose, false)
		}
	case EntryFrame:
		r.frame(rec, at, conn, flags&flagOut != 0, flags&flagHead != 0)
	}
}

// frame writes the record of a frame the tap copied, if it is recorded:
// rec itself, its payload length and CRC filled in, when the frame is
// recorded as it came.
func (r *Recorder) frame(rec []byte, at time.Duration, conn uint64, out, head bool) {
	var f proto.Frame
	b := rec[frameAt:]
	if head {
		h, err := proto.DecodeHeader(b, &r.limits)
		if err != nil {
			return
		}
		f.Header = h
	} else if n, err := f.Decode(b, &r.limits); err != nil || n != len(b) {
		return
	}
	c, fresh := r.track.get(conn)
	if fresh { // its open record was lost
		r.buf = appendOpen(r.buf[:0], at, conn, "")
		r.write(r.buf, EntryOpen, false)
	}
	keep, route, starts := r.track.decide(c, &f.Header, f.Route, out)
	if !keep || head {
		return
	}
	h, payload, asIs := f.Header, f.Payload, true
	if comp := h.Flags.Compression(); comp != proto.CompressionNone {
		// A payload that does not expand is kept as it came, compressed.
		if b, err := compression.Expand(r.expand[:0], payload, comp, h.PayloadRoom(r.limits.MaxFrameSize)); err == nil {
			r.expand, payload, asIs = b, b, false
			h.Flags = h.Flags.WithCompression(proto.CompressionNone)
		}
	}
	n, act := len(payload), Keep
	if ok, keep := userPayload(h.Kind); ok && len(r.o.Redact) > 0 {
		if rule := redaction(r.o.Redact, route); rule != nil && rule.Action != Keep {
			act, keep, asIs = rule.Action, min(keep, len(payload)), false
			h.Flags = h.Flags.WithCompression(proto.CompressionNone)
			r.redact = append(r.redact[:0], payload[:keep]...)
			if act == Replace {
				r.redact = append(r.redact, rule.With...)
			}
			payload = r.redact
		}
	}
	if asIs {
		binary.BigEndian.PutUint32(rec[frameAt-4:], uint32(n))
		finishRecord(rec, 0)
		r.write(rec, EntryFrame, starts)
		return
	}
	r.buf = appendFrame(r.buf[:0], at, conn, out, act, n, h, f.Route, f.Metadata, payload)
	r.write(r.buf, EntryFrame, starts)
}

// write writes the record rec of type t, unless it would take the file
// past MaxBytes: then the recording ends.
func (r *Recorder) write(rec []byte, t EntryType, starts bool) {
	if r.written+int64(len(rec))+RecordPrefixSize+endBodySize+int64(len(r.track.m))*(RecordPrefixSize+RecordHeadSize) > r.o.MaxBytes {
		r.end(EndMaxBytes)
		return
	}
	r.put(rec)
	switch t {
	case EntryOpen:
		r.counts.Conns++
	case EntryFrame:
		r.counts.Frames++
		if starts {
			r.counts.Calls++
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
}

// publish makes what the writer has written so far Stats'.
func (r *Recorder) publish() {
	r.conns.Store(r.counts.Conns)
	r.calls.Store(r.counts.Calls)
	r.frames.Store(r.counts.Frames)
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
	r.publish()
	s := r.Stats()
	s.Ended = why
	r.put(appendEnd(r.buf[:0], at, &s))
	r.bytes.Store(r.written)
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
