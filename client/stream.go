package client

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/internal/stream"
	"github.com/rpcd/rpcd/proto"
)

// The client's side of streams (docs/streams.md): streams it opens to the
// server's stream routes (OpenStream), and streams the server opens to the
// stream routes of Options.Handler, each served on a goroutine of its own.
// The goroutine reading the connection moves frames into the streams'
// state and never waits: a stream's buffer holds no more than the window
// the client granted.

// streamTable is a wire's open streams, by id.
type streamTable struct {
	mu       sync.Mutex
	m        map[uint32]*stream.Stream
	open     atomic.Int32 // len(m), for streamsIdle, which takes no lock
	closed   bool
	nextID   uint32 // the last id the client gave a stream it opened (odd)
	accepted int    // streams the server opened, open
}

// OpenStream opens a stream to the server's stream route (registered with
// handler.Registry.HandleStream) on one of the client's connections, and
// returns once the StreamOpen is queued: the first Write waits for the
// server to grant credit. ctx governs the whole stream: its deadline goes
// to the server's handler, and its end resets the stream (Read and Write
// then fail with Canceled or DeadlineExceeded). Metadata from
// WithMetadata goes with it. A stream is never opened twice: a server's
// refusal (no such route, draining, too many streams) arrives on the first
// Read or Write as an Unprocessed *handler.Error; with no usable
// connection, OpenStream itself fails Unavailable, Unprocessed.
func (c *Client) OpenStream(ctx context.Context, route string) (handler.Stream, error) {
	s, err := c.openStream(ctx, route)
	return s, transport.Received(err)
}

func (c *Client) openStream(ctx context.Context, route string) (handler.Stream, error) {
	if err := transport.RefuseWait(ctx, "opening stream", route); err != nil {
		return nil, err // its Read and Write wait
	}
	if err := ctx.Err(); err != nil {
		return nil, stream.ContextError(err)
	}
	h, md, err := c.header(ctx, proto.KindStreamOpen, proto.CodecRaw, route, nil)
	if err != nil {
		return nil, err
	}
	if takes := c.opts.takes(); len(takes) > 0 { // the server answers in its first StreamCredit
		// First, so that a key of the caller's own does not stand in for it.
		md = append(proto.AppendMetadata(nil, proto.MetaCompression, proto.AppendCompressionList(nil, takes...)), md...)
		if len(md) > c.opts.Limits.MaxMetadata {
			return nil, &handler.Error{Code: proto.CodeResourceExhausted, Message: "metadata exceeds the limit", Unprocessed: true}
		}
	}
	w, err := c.pick()
	if err == c.noConn && c.opts.WaitForReady {
		w, err = c.awaitConn(ctx, route, err)
	}
	if err != nil {
		return nil, err
	}
	return w.openStream(ctx, h, route, md, c.opts.StreamWindow)
}

// openStream registers a stream this client opens and queues its
// StreamOpen.
func (w *wire) openStream(ctx context.Context, h proto.Header, route string, md proto.Metadata, window int) (handler.Stream, error) {
	t := &w.streams
	t.mu.Lock()
	if t.closed || w.dead() {
		t.mu.Unlock()
		return nil, w.failure()
	}
	id := t.nextClientID()
	st := stream.New(id, true, (*wireLink)(w), ctx, window, 0)
	if t.m == nil {
		t.m = make(map[uint32]*stream.Stream)
	}
	t.m[id] = st
	t.open.Store(int32(len(t.m)))
	// Under t.mu, so that no reset of this stream can go out before it.
	w.enqueueAsync(proto.AppendStreamOpen(nil, id, route, h.Codec, h.Deadline, md, uint32(window)))
	t.mu.Unlock()
	w.needRead()
	st.Watch()
	return st, nil
}

// nextClientID returns an odd stream id not in use, with t.mu held.
func (t *streamTable) nextClientID() uint32 {
	for {
		t.nextID += 2
		if t.nextID&1 == 0 {
			t.nextID = 1
		}
		if _, busy := t.m[t.nextID]; !busy {
			return t.nextID
		}
	}
}

// handleStream acts on a stream frame from the server, on the reader
// goroutine. A frame that breaks the protocol fails the wire.
func (w *wire) handleStream(f *proto.Frame) error {
	if f.Kind == proto.KindStreamOpen {
		return w.acceptStream(f)
	}
	if f.Kind == proto.KindStreamReset && !proto.StreamOpenedByClient(f.ID) {
		if code, _ := f.ErrorBody(); code == proto.CodeOK {
			return protocolError("a StreamReset with code 0 from the stream's opener")
		}
	}
	t := &w.streams
	t.mu.Lock()
	st := t.m[f.ID]
	if st != nil && f.Kind == proto.KindStreamReset {
		t.forgetLocked(st)
	}
	t.mu.Unlock()
	if st == nil {
		return nil // in flight when the stream finished
	}
	switch f.Kind {
	case proto.KindStreamData:
		return st.OnData(f.Payload, f.Flags.Compression(), f.PayloadRoom(w.lim.MaxFrameSize))
	case proto.KindStreamCredit:
		if takes, ok := f.Metadata.Get(proto.MetaCompression); ok && st.AwaitsFirstCredit() {
			w.settleStream(st, takes)
		}
		return st.OnCredit(f.StreamWindow())
	case proto.KindStreamEnd:
		return st.OnEnd()
	case proto.KindStreamReset:
		code, msg := f.ErrorBody()
		st.OnReset(code, msg, f.Flags&proto.FlagUnprocessed != 0)
		w.idleCheck()
	}
	return nil
}

// acceptStream runs the client's handler for a stream the server opens, or
// refuses it.
func (w *wire) acceptStream(f *proto.Frame) error {
	if proto.StreamOpenedByClient(f.ID) {
		return protocolError("StreamOpen with an odd stream id from the server")
	}
	refuse := func(code proto.Code, msg string) error {
		w.enqueueAsync(proto.AppendStreamReset(nil, f.ID, proto.FlagUnprocessed, code, msg))
		return nil
	}
	t := &w.streams
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[f.ID] != nil {
		return protocolError("StreamOpen for a stream already open")
	}
	var rt *handler.StreamRoute
	if w.srv.reg != nil {
		rt = w.srv.reg.LookupStream(f.Route)
	}
	switch {
	case rt == nil:
		return refuse(proto.CodeNotFound, "the client has no stream route "+string(f.Route))
	case t.closed || w.dead():
		return nil
	case t.accepted >= w.srv.max:
		return refuse(proto.CodeResourceExhausted, "too many streams from the server open on this client")
	}
	call := &handler.Call{
		Route: rt.Name(), ID: f.ID, Codec: f.Codec, Remote: w.nc.RemoteAddr(), Peer: w.srv.peer,
		Metadata: proto.Metadata(append([]byte(nil), f.Metadata...)),
	}
	window := w.srv.window
	st := stream.New(f.ID, false, (*wireLink)(w), call, window, int(f.StreamWindow()))
	st.SetOnFinish(func() { call.Cancel(context.Canceled) })
	credit := proto.AppendStreamCredit(nil, f.ID, uint32(window))
	if takes, ok := f.Metadata.Get(proto.MetaCompression); ok && len(w.streamTakes) > 0 {
		w.settleStream(st, takes)
		credit = proto.AppendFirstStreamCredit(nil, f.ID, uint32(window), w.streamTakes...)
	}
	var deadline time.Time
	if f.Deadline > 0 {
		deadline = time.Now().Add(time.Duration(f.Deadline) * time.Millisecond)
	}
	call.Start(transport.WithStream(context.Background(), st), deadline)
	if t.m == nil {
		t.m = make(map[uint32]*stream.Stream)
	}
	t.m[f.ID] = st
	t.open.Store(int32(len(t.m)))
	t.accepted++
	w.enqueueAsync(credit)
	w.calls.wg.Add(1)
	go func() {
		defer w.calls.wg.Done()
		err := w.srv.run.Stream(rt, call)
		st.Finish(err)
		call.End()
	}()
	return nil
}

// settleStream has st's data compressed in Options.Compression if the
// server's list, takes, names it (docs/protocol.md, "Compression").
func (w *wire) settleStream(st *stream.Stream, takes []byte) {
	if w.streamZip != proto.CompressionNone && slices.Contains(proto.ParseCompressionList(takes), w.streamZip) {
		st.SetCompression(w.streamZip, w.zipMin)
	}
}

func protocolError(msg string) error {
	return &handler.Error{Code: proto.CodeInternal, Message: "protocol error: " + msg}
}

// forgetLocked removes st from the table, with t.mu held.
func (t *streamTable) forgetLocked(st *stream.Stream) {
	if t.m[st.ID()] != st {
		return
	}
	delete(t.m, st.ID())
	t.open.Store(int32(len(t.m)))
	if !proto.StreamOpenedByClient(st.ID()) {
		t.accepted--
	}
}

// streamsIdle reports whether no stream is open on w.
func (w *wire) streamsIdle() bool { return w.streams.open.Load() == 0 }

// idleCheck closes a wire the server is going away from once its last
// call and stream are done.
func (w *wire) idleCheck() {
	if w.goingAway.Load() {
		w.closeIfIdle()
	}
}

// closeStreams fails every stream of a failed wire.
func (w *wire) closeStreams() {
	t := &w.streams
	t.mu.Lock()
	m := t.m
	t.m, t.closed, t.accepted = nil, true, 0
	t.open.Store(0)
	t.mu.Unlock()
	for _, st := range m {
		st.Fail(stream.ErrConnLost)
	}
}

// wireLink is a wire as its streams see it (stream.Link).
type wireLink wire

// SendData appends a StreamData frame to the write queue, for the writer
// goroutine; the credit the server granted bounds what it queues.
func (l *wireLink) SendData(_ context.Context, id uint32, data []byte, zip proto.Compression) error {
	w := (*wire)(l)
	w.wmu.Lock()
	if w.dead() {
		w.wmu.Unlock()
		return stream.ErrConnLost
	}
	if n := proto.HeaderSize + len(data); cap(w.wbuf)-len(w.wbuf) < n {
		// Double, rather than grow by a quarter as append does: a large
		// window's worth of data may queue here between two writes.
		grown := make([]byte, len(w.wbuf), max(2*cap(w.wbuf), len(w.wbuf)+n, 64<<10))
		copy(grown, w.wbuf)
		w.wbuf = grown
	}
	start := len(w.wbuf)
	w.wbuf = proto.AppendStreamData(w.wbuf, id, data)
	proto.SetCompression(w.wbuf[start:], zip)
	if w.flushing {
		w.wmu.Unlock()
		return nil
	}
	w.flushing = true
	w.wmu.Unlock()
	select {
	case w.wsig <- struct{}{}:
	default:
	}
	return nil
}

// SendControl queues a small stream frame.
func (l *wireLink) SendControl(frame []byte) error {
	w := (*wire)(l)
	if w.dead() {
		return stream.ErrConnLost
	}
	w.enqueueAsync(frame)
	return nil
}

// Forget removes a finished stream from the wire's table.
func (l *wireLink) Forget(st *stream.Stream) {
	w := (*wire)(l)
	t := &w.streams
	t.mu.Lock()
	t.forgetLocked(st)
	t.mu.Unlock()
	w.idleCheck()
}
