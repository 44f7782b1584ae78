package reactor

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/internal/stream"
	"github.com/rpcd/rpcd/proto"
)

// The server's side of streams (docs/streams.md). The event loop only
// moves frames: a StreamData's bytes are copied into the stream's buffer,
// which the window bounds (the loop never waits and never holds more than
// it granted), and credits, ends and resets update the stream's state. A
// stream's handler runs on a goroutine of its own; what it writes goes
// through the connection's outbox (conn.replies) and wake, as server
// push does, and it waits for credit, or for room in the outbox, on its
// own goroutine.

// streamTable is a connection's open streams, by id.
type streamTable struct {
	mu       sync.Mutex
	m        map[uint32]*stream.Stream
	closed   bool   // the connection is gone: no new streams
	accepted int    // streams the client opened, open
	opened   int    // streams the server opened, open
	nextID   uint32 // the last id the server gave a stream it opened (even)

	// room is closed, under conn.mu, when the loop takes the outbox, for
	// stream writers waiting for room in it; nil if none waits.
	room chan struct{}
	// open counts the streams in m, for the loop to read without t.mu.
	open atomic.Int32
}

// serverStreams counts the stream handlers running, for Shutdown.
type serverStreams struct {
	mu      sync.Mutex
	closed  bool // Shutdown waits: no new handler may start
	running atomic.Int64
	wg      sync.WaitGroup
}

// start counts a handler about to start; false once Shutdown waits.
func (ss *serverStreams) start() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return false
	}
	ss.running.Add(1)
	ss.wg.Add(1)
	return true
}

func (ss *serverStreams) done() {
	ss.running.Add(-1)
	ss.wg.Done()
}

// waitChan closes the counter to new handlers and returns a channel closed
// once those running have returned.
func (ss *serverStreams) waitChan() <-chan struct{} {
	ss.mu.Lock()
	ss.closed = true
	ss.mu.Unlock()
	return waitChan(&ss.wg)
}

// handleStream acts on a stream frame from the client, on the loop.
func (c *conn) handleStream(f *proto.Frame, out []byte) ([]byte, *ending) {
	if f.Kind == proto.KindStreamOpen {
		return c.acceptStream(f, out)
	}
	if f.Kind == proto.KindStreamReset && proto.StreamOpenedByClient(f.ID) {
		if code, _ := f.ErrorBody(); code == proto.CodeOK {
			return out, &ending{proto.CodeInternal, "rpcd: protocol error: a StreamReset with code 0 from the stream's opener"}
		}
	}
	t := &c.streams
	t.mu.Lock()
	st := t.m[f.ID]
	if st != nil && f.Kind == proto.KindStreamReset {
		t.forgetLocked(st)
	}
	t.mu.Unlock()
	if st == nil {
		return out, nil // in flight when the stream finished
	}
	var err error
	switch f.Kind {
	case proto.KindStreamData:
		err = st.OnData(f.Payload, f.Flags.Compression(), f.PayloadRoom(c.s.opts.Limits.MaxFrameSize))
	case proto.KindStreamCredit:
		if takes, ok := f.Metadata.Get(proto.MetaCompression); ok && st.AwaitsFirstCredit() {
			c.settleStream(st, takes)
		}
		err = st.OnCredit(f.StreamWindow())
	case proto.KindStreamEnd:
		err = st.OnEnd()
	case proto.KindStreamReset:
		code, msg := f.ErrorBody()
		st.OnReset(code, msg, f.Flags&proto.FlagUnprocessed != 0)
	}
	if err != nil {
		return out, &ending{proto.CodeInternal, err.Error()}
	}
	return out, nil
}

// acceptStream starts the handler of a stream the client opens, or
// refuses it with an Unprocessed StreamReset.
func (c *conn) acceptStream(f *proto.Frame, out []byte) ([]byte, *ending) {
	if !proto.StreamOpenedByClient(f.ID) {
		return out, &ending{proto.CodeInternal, "rpcd: protocol error: StreamOpen with an even stream id from the client"}
	}
	refuse := func(code proto.Code, msg string) ([]byte, *ending) {
		c.s.stats.callRefused(code)
		return proto.AppendStreamReset(out, f.ID, proto.FlagUnprocessed, code, msg), nil
	}
	t := &c.streams
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.m[f.ID] != nil:
		return out, &ending{proto.CodeInternal, "rpcd: protocol error: StreamOpen for a stream already open"}
	case c.goingAway || c.s.draining.Load() || t.closed:
		return refuse(proto.CodeUnavailable, "server is draining")
	case t.accepted >= c.s.opts.MaxStreams:
		return refuse(proto.CodeResourceExhausted, "too many streams open on the connection")
	}
	rt := c.s.reg.LookupStream(f.Route)
	if rt == nil {
		return refuse(proto.CodeNotFound, "no stream route "+string(f.Route))
	}
	if !c.s.streams.start() {
		return refuse(proto.CodeUnavailable, "server is draining")
	}
	call := &handler.Call{
		Route: rt.Name(), ID: f.ID, Codec: f.Codec, Remote: c.remote, Identity: c.identity, Peer: c.peer,
		Metadata: proto.Metadata(append([]byte(nil), f.Metadata...)), // f is a view of the input
	}
	window := c.s.opts.StreamWindow
	st := stream.New(f.ID, false, (*connLink)(c), call, window, int(f.StreamWindow()))
	st.SetOnFinish(func() { call.Cancel(context.Canceled) })
	var takes []proto.Compression
	if theirs, ok := f.Metadata.Get(proto.MetaCompression); ok && c.s.opts.CompressMin >= 0 {
		c.settleStream(st, theirs)
		takes = compression.Supported()
	}
	var deadline time.Time
	if f.Deadline > 0 {
		deadline = time.Now().Add(time.Duration(f.Deadline) * time.Millisecond)
	}
	call.Start(transport.WithStream(c.s.opts.BaseContext, st), deadline)
	if t.m == nil {
		t.m = make(map[uint32]*stream.Stream)
	}
	t.m[f.ID] = st
	t.open.Add(1)
	t.accepted++
	go c.runStream(rt, call, st)
	return proto.AppendFirstStreamCredit(out, f.ID, uint32(window), takes...), nil
}

// settleStream has st's data compressed in the first compression of the
// client's list, takes, unless the server's compression is off
// (docs/protocol.md, "Compression"). The list names only compressions the
// server does: ParseCompressionList skips the others.
func (c *conn) settleStream(st *stream.Stream, takes []byte) {
	if cs := proto.ParseCompressionList(takes); len(cs) > 0 && c.s.opts.CompressMin >= 0 {
		st.SetCompression(cs[0], c.s.opts.CompressMin)
	}
}

// runStream runs a stream's handler and sends its outcome.
func (c *conn) runStream(rt *handler.StreamRoute, call *handler.Call, st *stream.Stream) {
	defer c.s.streams.done()
	err := c.s.run.Stream(rt, call)
	st.Finish(err)
	call.End()
}

// forgetLocked removes st from the table, with t.mu held.
func (t *streamTable) forgetLocked(st *stream.Stream) {
	if t.m[st.ID()] != st {
		return
	}
	delete(t.m, st.ID())
	t.open.Add(-1)
	if proto.StreamOpenedByClient(st.ID()) {
		t.accepted--
	} else {
		t.opened--
	}
}

// closeStreams fails every stream of a closed connection.
func (c *conn) closeStreams() {
	t := &c.streams
	t.mu.Lock()
	m := t.m
	t.m, t.closed = nil, true
	t.accepted, t.opened = 0, 0
	t.open.Store(0)
	t.mu.Unlock()
	for _, st := range m {
		st.Fail(stream.ErrConnLost)
	}
}

// OpenStream opens a stream to the client's stream route (registered with
// HandleStream in client.Options.Handler), implementing
// handler.StreamOpener. ctx governs the whole stream: its deadline goes
// to the client's handler, and its end resets the stream. Read and Write
// wait; call them from a Blocking handler or a goroutine of your own,
// never from an inline handler.
func (p *Peer) OpenStream(ctx context.Context, route string) (handler.Stream, error) {
	s, err := p.openStream(ctx, route)
	return s, transport.Received(err)
}

func (p *Peer) openStream(ctx context.Context, route string) (handler.Stream, error) {
	c := p.c
	if err := transport.RefuseWait(ctx, "opening the peer's stream", route); err != nil {
		return nil, err // its Read and Write wait
	}
	if err := ctx.Err(); err != nil {
		return nil, stream.ContextError(err)
	}
	h, err := c.s.header(ctx, proto.KindStreamOpen, proto.CodecRaw, route, nil)
	if err != nil {
		return nil, err
	}
	window := c.s.opts.StreamWindow
	t := &c.streams
	t.mu.Lock()
	switch {
	case t.closed || c.closed.Load():
		t.mu.Unlock()
		return nil, errPeerGone
	case c.peerGoingAway.Load():
		t.mu.Unlock()
		return nil, errPeerGoingAway
	case t.opened >= c.s.opts.MaxStreams:
		t.mu.Unlock()
		return nil, &handler.Error{Code: proto.CodeResourceExhausted, Message: "too many streams open to the client", Unprocessed: true}
	}
	id := t.nextServerID()
	st := stream.New(id, true, (*connLink)(c), ctx, window, 0)
	var md proto.Metadata
	if c.s.opts.CompressMin >= 0 { // a client that takes some answers in its first StreamCredit
		md = proto.AppendMetadata(nil, proto.MetaCompression, proto.AppendCompressionList(nil, compression.Supported()...))
	}
	if t.m == nil {
		t.m = make(map[uint32]*stream.Stream)
	}
	t.m[id] = st
	t.open.Add(1)
	t.opened++
	// Under t.mu, so that no reset of this stream can go out before it.
	err = (*connLink)(c).SendControl(proto.AppendStreamOpen(nil, id, route, proto.CodecRaw, h.Deadline, md, uint32(window)))
	if err != nil {
		t.forgetLocked(st)
	}
	t.mu.Unlock()
	if err != nil {
		return nil, err
	}
	st.Watch()
	return st, nil
}

// nextServerID returns an even stream id not in use, with t.mu held.
func (t *streamTable) nextServerID() uint32 {
	for {
		t.nextID += 2
		if t.nextID == 0 {
			continue
		}
		if _, busy := t.m[t.nextID]; !busy {
			return t.nextID
		}
	}
}

// connLink is a connection as its streams see it (stream.Link).
type connLink conn

// SendData queues a StreamData frame in the outbox, waiting while the
// outbox holds more than half of MaxOutbound (the client is not reading
// its socket fast enough) until ctx ends.
func (l *connLink) SendData(ctx context.Context, id uint32, data []byte, zip proto.Compression) error {
	c := (*conn)(l)
	n := proto.HeaderSize + len(data)
	for {
		c.mu.Lock()
		if c.closed.Load() {
			c.mu.Unlock()
			return stream.ErrConnLost
		}
		if len(c.replies) == 0 || len(c.replies)+n <= c.s.opts.MaxOutbound/2 {
			break
		}
		if c.streams.room == nil {
			c.streams.room = make(chan struct{})
		}
		room := c.streams.room
		c.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	start := len(c.replies)
	c.replies = proto.AppendStreamData(c.replies, id, data)
	proto.SetCompression(c.replies[start:], zip)
	c.unlockAndWake()
	return nil
}

// SendControl queues a small stream frame in the outbox.
func (l *connLink) SendControl(frame []byte) error {
	c := (*conn)(l)
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return stream.ErrConnLost
	}
	c.replies = append(c.replies, frame...)
	c.unlockAndWake()
	return nil
}

// Forget removes a finished stream from the connection's table.
func (l *connLink) Forget(st *stream.Stream) {
	t := &(*conn)(l).streams
	t.mu.Lock()
	t.forgetLocked(st)
	t.mu.Unlock()
}

// keepOutbox reports whether the loop keeps the outbox's large buffer
// rather than dropping it: while streams are open, data may flow through
// it, and a stream that sends then costs one buffer, not one per wake-up.
func (c *conn) keepOutbox() bool { return c.streams.open.Load() > 0 }

// outboxTaken wakes the stream writers waiting for room in the outbox,
// with c.mu held; the loop has just taken it.
func (c *conn) outboxTaken() {
	if c.streams.room != nil {
		close(c.streams.room)
		c.streams.room = nil
	}
}
