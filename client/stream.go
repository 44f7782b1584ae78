package client

import (
	"context"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/internal/engine"
	"github.com/rpcd/rpcd/internal/stream"
	"github.com/rpcd/rpcd/proto"
)

// The client's side of streams (docs/streams.md): streams it opens to the
// server's stream routes (OpenStream), and streams the server opens to the
// stream routes of Options.Handler, each served on a goroutine of its own.
// The goroutine reading the connection moves frames into the streams'
// state (engine.Streams) and never waits: a stream's buffer holds no more
// than the window the client granted.

// streamConfig is what the client's connections share about streams.
func streamConfig(o *Options, srv *serving) engine.StreamConfig {
	cfg := engine.StreamConfig{
		Client:      true,
		Window:      o.StreamWindow,
		MaxAccepted: o.MaxHandlers,
		Limits:      o.Limits,
		Registry:    o.Handler,
		Runner:      &srv.run,
		Base:        context.Background(),
		Takes:       o.takes(),
		Zip:         o.Compression,
		ZipMin:      o.CompressMin,
	}
	if o.Compression == proto.CompressionNone {
		cfg.ZipMin = -1 // its data goes as it is
	}
	return cfg
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
	h, md, err := engine.Header(ctx, proto.KindStreamOpen, proto.CodecRaw, route, nil, &c.opts.Limits)
	if err != nil {
		return nil, err
	}
	w, err := c.pick()
	if err == c.noConn && c.opts.WaitForReady {
		w, err = c.awaitConn(ctx, route, err)
	}
	if err != nil {
		return nil, err
	}
	st, err := w.streams.Start(ctx, route, h.Deadline, md)
	if err != nil {
		return nil, err
	}
	w.needRead()
	return st, nil
}

// handleStream acts on a stream frame from the server, on the reader
// goroutine: it queues what the frame answers, then starts the handlers
// of the streams it accepted. A frame that breaks the protocol fails the
// wire.
func (w *wire) handleStream(f *proto.Frame) {
	out, err := w.streams.Handle(f, nil)
	if len(out) > 0 {
		w.enqueueAsync(out)
	}
	for i, run := range w.starting {
		w.calls.wg.Add(1)
		go func() {
			defer w.calls.wg.Done()
			run()
		}()
		w.starting[i] = nil
	}
	w.starting = w.starting[:0]
	if err != nil {
		w.goAwayAndClose(err)
		w.fail(err)
		return
	}
	if f.Kind == proto.KindStreamReset {
		w.idleCheck()
	}
}

// idleCheck closes a wire the server is going away from once its last
// call and stream are done.
func (w *wire) idleCheck() {
	if w.goingAway.Load() {
		w.closeIfIdle()
	}
}

// wireLink is a wire as its streams see it (stream.Link,
// engine.StreamHost).
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
	w.kickWriter()
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
	w.streams.Forget(st)
	w.idleCheck()
}

// OpenErr is why the client may open no stream on the wire now.
func (l *wireLink) OpenErr() error {
	if w := (*wire)(l); w.dead() {
		return w.failure()
	}
	return nil
}

// AcceptErr refuses the server's streams once the wire has failed.
func (l *wireLink) AcceptErr() *handler.Error {
	if (*wire)(l).dead() {
		return errWireDead
	}
	return nil
}

var errWireDead = &handler.Error{Code: proto.CodeUnavailable, Message: "the connection is closed", Unprocessed: true}

// NewCall returns the Call of a stream handler on the wire.
func (l *wireLink) NewCall() *handler.Call {
	w := (*wire)(l)
	return &handler.Call{Remote: w.nc.RemoteAddr(), Peer: w.srv.peer}
}

// Go has the reader start run once the stream's first StreamCredit is
// queued (handleStream): queued after the goroutine's first frames, it
// could follow them.
func (l *wireLink) Go(run func()) bool {
	w := (*wire)(l)
	w.starting = append(w.starting, run)
	return true
}

// Refused counts nothing: the client keeps no counters of refusals.
func (l *wireLink) Refused(proto.Code) {}
