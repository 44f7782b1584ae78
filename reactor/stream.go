package reactor

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/internal/engine"
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
	h, md, err := engine.Header(ctx, proto.KindStreamOpen, proto.CodecRaw, route, nil, &c.s.opts.Limits)
	if err != nil {
		return nil, err
	}
	return c.streams.Start(ctx, route, h.Deadline, md)
}

// streamConfig is what the server's connections share about streams.
func (s *Server) streamConfig() *engine.StreamConfig {
	cfg := &engine.StreamConfig{
		Window:      s.opts.StreamWindow,
		MaxOpened:   s.opts.MaxStreams,
		MaxAccepted: s.opts.MaxStreams,
		Limits:      s.opts.Limits,
		Registry:    s.reg,
		Runner:      &s.run,
		Base:        s.opts.BaseContext,
		ZipMin:      s.opts.CompressMin, // Zip none: the client's first choice
	}
	if s.opts.CompressMin >= 0 {
		cfg.Takes = compression.Supported()
	}
	return cfg
}

// connLink is a connection as its streams see it (stream.Link,
// engine.StreamHost).
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
		if c.room == nil {
			c.room = make(chan struct{})
		}
		room := c.room
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
func (l *connLink) Forget(st *stream.Stream) { (*conn)(l).streams.Forget(st) }

// OpenErr is why the server may open no stream to the client now.
func (l *connLink) OpenErr() error {
	c := (*conn)(l)
	switch {
	case c.closed.Load():
		return errPeerGone
	case c.peerGoingAway.Load():
		return errPeerGoingAway
	}
	return nil
}

// AcceptErr refuses the client's streams once the server drains, or the
// connection has gone away for its age. It runs on the loop, which alone
// sets goingAway.
func (l *connLink) AcceptErr() *handler.Error {
	c := (*conn)(l)
	switch {
	case c.s.draining.Load():
		return errDraining
	case c.goingAway:
		return errAged
	}
	return nil
}

var (
	errDraining = &handler.Error{Code: proto.CodeUnavailable, Message: "server is draining", Unprocessed: true}
	errAged     = &handler.Error{Code: proto.CodeUnavailable, Message: msgAged, Unprocessed: true}
)

// NewCall returns the Call of a stream handler on the connection.
func (l *connLink) NewCall() *handler.Call {
	c := (*conn)(l)
	return &handler.Call{Remote: c.remote, Identity: c.identity, Peer: c.peer}
}

// Go runs a stream handler, counted for Shutdown; the first StreamCredit,
// in the loop's output, is written before anything the handler sends
// through the outbox.
func (l *connLink) Go(run func()) bool {
	ss := &(*conn)(l).s.streams
	if !ss.start() {
		return false
	}
	go func() {
		defer ss.done()
		run()
	}()
	return true
}

// Refused counts a stream the server refused.
func (l *connLink) Refused(code proto.Code) { (*conn)(l).s.stats.callRefused(code) }

// keepOutbox reports whether the loop keeps the outbox's large buffer
// rather than dropping it: while streams are open, data may flow through
// it, and a stream that sends then costs one buffer, not one per wake-up.
func (c *conn) keepOutbox() bool { return c.streams.Open() > 0 }

// outboxTaken wakes the stream writers waiting for room in the outbox,
// with c.mu held; the loop has just taken it.
func (c *conn) outboxTaken() {
	if c.room != nil {
		close(c.room)
		c.room = nil
	}
}
