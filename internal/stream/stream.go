// Package stream is the state of one flow-controlled stream
// (docs/protocol.md, "Streams"), shared by the server (reactor) and the
// client: the receive buffer, bounded by the window it grants, the credit
// its writer may spend, half-closes and resets. It knows no transport: the
// connection's reader hands it frames through the On methods, which never
// block, and it sends frames through a Link.
package stream

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/proto"
)

// Defaults for a stream's window and the largest StreamData it sends.
const (
	DefaultWindow = 256 << 10
	// MaxChunk keeps a StreamData frame, header included, under 64 KiB:
	// the reactor reads such frames in place and the client in its read
	// buffer, with no buffer of their own.
	MaxChunk = 32 << 10
)

// Link is the connection a stream's frames go out on.
type Link interface {
	// SendData queues a StreamData frame with data on stream id, copying
	// data, compressed with zip (CompressionNone: data is the stream's
	// bytes as they are). It may wait for room on the connection until ctx
	// is done.
	SendData(ctx context.Context, id uint32, data []byte, zip proto.Compression) error
	// SendControl queues a small frame (StreamCredit, StreamEnd,
	// StreamReset) that is already encoded; it never waits.
	SendControl(frame []byte) error
	// Forget removes the stream from the connection's table: it is
	// finished.
	Forget(s *Stream)
}

// Stream is one stream on a connection. It implements handler.Stream.
type Stream struct {
	id     uint32
	opener bool // this end opened the stream
	link   Link
	ctx    context.Context
	window int // the receive window this end grants

	// onFinish runs once when the stream finishes (the handler's context
	// is cancelled there, the opener's context watch is stopped).
	onFinish func()

	mu       sync.Mutex
	buf      ring              // bytes received and not read
	granted  int               // bytes the other end may still send
	unacked  int               // bytes read and not yet granted back
	recvEnd  bool              // the other end's StreamEnd arrived
	credit   int               // bytes this end may send
	sendEnd  bool              // this end sent StreamEnd
	zip      proto.Compression // what this end's StreamData of zipMin bytes or more go compressed in
	zipMin   int
	credited bool // a StreamCredit has arrived
	finished bool
	err      error // why it finished; nil for a clean end (code 0)

	stopWatch func() bool // stops Watch's context watch

	readable chan struct{} // a Read may go on; capacity 1
	writable chan struct{} // a Write may go on; capacity 1
	done     chan struct{} // closed when finished
	hooked   chan struct{} // closed once onFinish has run, by whoever finished it
}

// New returns a stream with id on link. window is the receive window this
// end grants: an opener's is the one its StreamOpen carries; an acceptor's
// the one its first StreamCredit grants. credit is what this end may send
// at first: an acceptor's is the window of the StreamOpen, an opener's 0.
// ctx is the stream's context: the opener's, or the handler's Call.
func New(id uint32, opener bool, link Link, ctx context.Context, window, credit int) *Stream {
	if window <= 0 {
		window = DefaultWindow
	}
	return &Stream{
		id: id, opener: opener, link: link, ctx: ctx, window: window,
		granted:  window,
		credit:   credit,
		readable: make(chan struct{}, 1),
		writable: make(chan struct{}, 1),
		done:     make(chan struct{}),
		hooked:   make(chan struct{}),
	}
}

// SetOnFinish sets a function to run once the stream finishes, on the
// goroutine that finishes it; Finish waits for it. Call it before the
// stream is handed to anyone.
func (s *Stream) SetOnFinish(f func()) { s.onFinish = f }

// Watch has an opener's stream reset (Canceled or DeadlineExceeded) as
// soon as its context ends, whether or not a Read or Write is waiting, so
// the handler at the other end stops at once. Call it before the stream is
// handed to anyone.
func (s *Stream) Watch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.finished {
		s.stopWatch = context.AfterFunc(s.ctx, func() { _ = s.abandon() })
	}
}

// SetCompression has Write send the stream's bytes compressed with c, in
// StreamData of min bytes or more that shrink: the other end has named c
// (docs/protocol.md, "Compression"). CompressionNone sends them as they
// are.
func (s *Stream) SetCompression(c proto.Compression, min int) {
	s.mu.Lock()
	s.zip, s.zipMin = c, min
	s.mu.Unlock()
}

// ID is the stream id.
func (s *Stream) ID() uint32 { return s.id }

// Window is the receive window this end grants.
func (s *Stream) Window() int { return s.window }

// Done is closed once the stream is finished.
func (s *Stream) Done() <-chan struct{} { return s.done }

// Context implements handler.Stream.
func (s *Stream) Context() context.Context { return s.ctx }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// ErrProtocol is wrapped by the errors the On methods return for frames
// that break the protocol: the connection must end.
var ErrProtocol = proto.ErrProtocol

// OnData takes a StreamData payload from the connection's reader, copying
// it. More than the window granted is a protocol error, as is data after
// the other end's StreamEnd. A payload compressed with zip is expanded
// first, and what it expands to is what counts against the window; room
// is what the frame's payload may expand to under the receiver's frame
// limit (proto.Header.PayloadRoom). One that does not expand resets the
// stream with InvalidArgument: its bytes are lost, the connection is not.
func (s *Stream) OnData(p []byte, zip proto.Compression, room int) error {
	if zip != proto.CompressionNone {
		return s.onCompressed(p, zip, room)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.takeLocked(p)
}

// takeLocked adds p, the stream's bytes, to what is unread; with s.mu
// held.
func (s *Stream) takeLocked(p []byte) error {
	switch {
	case s.finished:
		return nil // in flight when this end finished it
	case s.recvEnd:
		return protoErr("stream data after the sender's StreamEnd")
	case len(p) > s.granted:
		return protoErr("stream data beyond the window granted")
	}
	s.granted -= len(p)
	if len(p) == 0 {
		return nil
	}
	s.buf.write(p, s.window) // unread + granted <= window: the ring never outgrows it
	signal(s.readable)
	return nil
}

// onCompressed expands a compressed StreamData payload into a pooled
// buffer, bounded by the window granted and the frame's room, and takes
// what it expands to. It expands outside the lock: only this, the
// connection's one reader, lowers granted, so the bound read under the
// lock still holds.
func (s *Stream) onCompressed(p []byte, zip proto.Compression, room int) error {
	s.mu.Lock()
	switch {
	case s.finished:
		s.mu.Unlock()
		return nil
	case s.recvEnd: // as for data that is not compressed, before looking at it
		s.mu.Unlock()
		return protoErr("stream data after the sender's StreamEnd")
	}
	limit := min(s.granted, room)
	s.mu.Unlock()
	bp := compression.GetBuffer()
	b, err := compression.Expand((*bp)[:0], p, zip, limit)
	defer func() { compression.PutBuffer(bp, b) }()
	switch {
	case errors.Is(err, compression.ErrTooLarge):
		return protoErr("compressed stream data expands beyond the window granted or the frame limit")
	case err != nil:
		msg := "stream data does not expand: " + handler.MessageOf(err)
		s.Reset(proto.CodeInvalidArgument, msg, &handler.Error{Code: proto.CodeInvalidArgument, Message: msg})
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.takeLocked(b)
}

// AwaitsFirstCredit reports whether this end opened the stream and no
// StreamCredit has arrived yet: the next is the acceptor's first, the one
// whose metadata may name the compressions it takes. Only the
// connection's reader, which calls OnCredit, may rely on the answer.
func (s *Stream) AwaitsFirstCredit() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opener && !s.credited
}

// OnCredit takes a StreamCredit grant.
func (s *Stream) OnCredit(n uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.credited = true
	if s.finished {
		return nil
	}
	if s.credit+int(n) > proto.MaxStreamWindow {
		return protoErr("stream credit past 2^31-1")
	}
	s.credit += int(n)
	signal(s.writable)
	return nil
}

// OnEnd takes the other end's StreamEnd.
func (s *Stream) OnEnd() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finished {
		return nil
	}
	if s.recvEnd {
		return protoErr("a second StreamEnd")
	}
	s.recvEnd = true
	signal(s.readable)
	return nil
}

// OnReset takes the other end's StreamReset: the stream is finished. Code
// 0 (from the acceptor, whose handler returned nil) keeps what was
// received readable; any other code fails Read and Write with it.
func (s *Stream) OnReset(code proto.Code, msg []byte, unprocessed bool) {
	var err error
	if code != proto.CodeOK {
		err = transport.Received(&handler.Error{Code: code, Message: string(msg), Unprocessed: unprocessed})
	}
	s.finish(err, false)
}

// Fail finishes the stream with err, sending nothing: the connection is
// gone.
func (s *Stream) Fail(err error) { s.finish(transport.Received(err), false) }

// ErrConnLost is the error of a stream whose connection closed.
var ErrConnLost = &handler.Error{Code: proto.CodeUnavailable, Message: "stream: connection lost"}

// finish marks the stream finished with err (nil: a clean end); with
// forget, it removes it from the link's table. It reports whether this
// call finished it.
func (s *Stream) finish(err error, forget bool) bool {
	s.mu.Lock()
	if s.finished {
		s.mu.Unlock()
		return false
	}
	s.finished, s.err = true, err
	if err != nil {
		s.buf = ring{} // a failed stream's unread bytes are dropped
	}
	close(s.done)
	stop := s.stopWatch
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	if forget {
		s.link.Forget(s)
	}
	if s.onFinish != nil {
		s.onFinish()
	}
	close(s.hooked)
	return true
}

// Reset finishes the stream from this end: it sends a StreamReset with
// code and msg (flags may hold Unprocessed) unless the stream is already
// finished, and reports whether it did. Read and Write then fail with err
// (nil: io.EOF, for a clean end).
func (s *Stream) Reset(code proto.Code, msg string, err error) bool {
	if !s.finish(err, true) {
		return false
	}
	_ = s.link.SendControl(proto.AppendStreamReset(nil, s.id, 0, code, msg))
	return true
}

// Read implements handler.Stream.
func (s *Stream) Read(p []byte) (int, error) {
	for {
		s.mu.Lock()
		if s.buf.n > 0 {
			n := s.buf.read(p)
			grant := 0
			if !s.finished && !s.recvEnd {
				s.unacked += n
				if s.unacked >= s.window/4 || s.buf.n == 0 && s.unacked >= s.window/16 {
					grant, s.unacked = s.unacked, 0
					s.granted += grant
				}
			}
			s.mu.Unlock()
			if grant > 0 {
				_ = s.link.SendControl(proto.AppendStreamCredit(nil, s.id, uint32(grant)))
			}
			return n, nil
		}
		if s.err != nil {
			err := s.err
			s.mu.Unlock()
			return 0, err
		}
		if s.recvEnd || s.finished {
			s.mu.Unlock()
			return 0, io.EOF
		}
		s.mu.Unlock()
		if len(p) == 0 {
			return 0, nil
		}
		if err := s.wait(s.readable); err != nil {
			return 0, err
		}
	}
}

// Write implements handler.Stream.
func (s *Stream) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		s.mu.Lock()
		switch {
		case s.err != nil:
			err := s.err
			s.mu.Unlock()
			return written, err
		case s.finished:
			s.mu.Unlock()
			return written, io.EOF // the handler returned: it reads no more
		case s.sendEnd:
			s.mu.Unlock()
			return written, errWriteAfterEnd
		case s.credit == 0:
			s.mu.Unlock()
			if err := s.wait(s.writable); err != nil {
				return written, err
			}
			continue
		}
		n := min(len(p), s.credit, MaxChunk)
		s.credit -= n
		zip := s.zip
		if n < s.zipMin {
			zip = proto.CompressionNone
		}
		s.mu.Unlock()
		if err := s.send(p[:n], zip); err != nil {
			return written, s.failed(err)
		}
		written += n
		p = p[n:]
	}
	return written, nil
}

// send sends data, the stream's bytes, in one StreamData: compressed with
// zip if it shrinks so, else as it is. The credit counts the bytes as they
// are.
func (s *Stream) send(data []byte, zip proto.Compression) error {
	if zip == proto.CompressionNone {
		return s.link.SendData(s.ctx, s.id, data, zip)
	}
	bp := compression.GetBuffer()
	z := compression.Append((*bp)[:0], data, zip)
	defer func() { compression.PutBuffer(bp, z) }()
	if len(z) >= len(data) {
		return s.link.SendData(s.ctx, s.id, data, proto.CompressionNone)
	}
	return s.link.SendData(s.ctx, s.id, z, zip)
}

var errWriteAfterEnd = &handler.Error{Code: proto.CodeFailedPrecondition, Message: "stream: write after CloseSend"}

// CloseSend implements handler.Stream.
func (s *Stream) CloseSend() error {
	s.mu.Lock()
	if s.sendEnd || s.finished {
		s.mu.Unlock()
		return nil
	}
	s.sendEnd = true
	s.mu.Unlock()
	return s.link.SendControl(proto.AppendStreamEnd(nil, s.id))
}

// Close implements handler.Stream.
func (s *Stream) Close() error {
	if !s.opener {
		return s.CloseSend()
	}
	s.mu.Lock()
	ended := s.sendEnd && s.recvEnd
	s.mu.Unlock()
	if ended { // only the handler's outcome is to come
		select {
		case <-s.done:
		case <-s.ctx.Done():
			s.abandon()
		}
	} else {
		s.Reset(proto.CodeCanceled, "stream closed by the opener", errClosed)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == errClosed {
		return nil
	}
	return s.err
}

var errClosed = &handler.Error{Code: proto.CodeCanceled, Message: "stream: closed"}

// Finish ends an accepted stream once its handler has returned err: it
// ends this end's direction on success and sends the outcome in a
// StreamReset, unless the stream is already finished. When it returns,
// the stream's onFinish has run, on this goroutine or another: the
// transport may release the handler's Call.
func (s *Stream) Finish(err error) {
	defer func() { <-s.hooked }()
	s.mu.Lock()
	finished, sendEnd := s.finished, s.sendEnd
	s.mu.Unlock()
	if finished {
		return
	}
	if err == nil {
		if !sendEnd {
			_ = s.CloseSend()
		}
		s.Reset(proto.CodeOK, "", nil)
		return
	}
	var flags proto.Flags
	if transport.AnswersUnprocessed(err) {
		flags = proto.FlagUnprocessed
	}
	if s.finish(err, true) {
		_ = s.link.SendControl(proto.AppendStreamReset(nil, s.id, flags, handler.CodeOf(err), handler.MessageOf(err)))
	}
}

// wait waits for ch, the stream to finish or its context to end. An
// opener whose context ends resets the stream.
func (s *Stream) wait(ch chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-s.done:
		return nil // the caller looks at why
	case <-s.ctx.Done():
		return s.abandon()
	}
}

// abandon ends the stream because its context ended: an opener resets
// it; an acceptor's handler gets the context's error and returns it.
func (s *Stream) abandon() error {
	err := ContextError(s.ctx.Err())
	if s.opener {
		code := handler.CodeOf(err)
		s.Reset(code, "stream abandoned by the opener: "+handler.MessageOf(err), err)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.err != nil {
			return s.err
		}
	}
	return err
}

// failed finishes the stream after its link failed to send with err.
func (s *Stream) failed(err error) error {
	if s.ctx.Err() != nil {
		return s.abandon()
	}
	s.finish(err, true)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	return err
}

// ContextError turns a context's error into a stream's: Canceled or
// DeadlineExceeded.
func ContextError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return &handler.Error{Code: proto.CodeDeadlineExceeded, Message: "stream: deadline exceeded"}
	}
	return &handler.Error{Code: proto.CodeCanceled, Message: "stream: canceled"}
}

func protoErr(msg string) error {
	return &protocolError{msg}
}

type protocolError struct{ msg string }

func (e *protocolError) Error() string { return "rpcd: protocol error: " + e.msg }
func (e *protocolError) Unwrap() error { return proto.ErrProtocol }

var _ handler.Stream = (*Stream)(nil)

// ring is a stream's receive buffer: a ring that grows, up to the window,
// as bytes wait unread, so that neither writing nor reading ever moves
// the bytes already in it (but when it grows).
type ring struct {
	b    []byte
	head int // where the unread bytes begin
	n    int // how many there are
}

// write appends p, growing the ring up to limit bytes; the caller keeps
// n+len(p) within limit.
func (r *ring) write(p []byte, limit int) {
	if r.n+len(p) > len(r.b) {
		size := min(max(2*len(r.b), r.n+len(p), 16<<10), max(limit, r.n+len(p)))
		b := make([]byte, size)
		r.read2(b)
		r.b, r.head = b, 0
	}
	tail := (r.head + r.n) % len(r.b)
	k := copy(r.b[tail:], p)
	copy(r.b, p[k:])
	r.n += len(p)
}

// read moves up to len(p) unread bytes into p.
func (r *ring) read(p []byte) int {
	k := r.read2(p)
	r.head = (r.head + k) % max(len(r.b), 1)
	r.n -= k
	if r.n == 0 {
		r.head = 0
	}
	return k
}

// read2 copies up to len(p) unread bytes into p without taking them.
func (r *ring) read2(p []byte) int {
	k := min(len(p), r.n)
	if k == 0 {
		return 0
	}
	first := copy(p[:k], r.b[r.head:min(r.head+k, len(r.b))])
	copy(p[first:k], r.b)
	return k
}
