package client

import (
	"context"
	"sync"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/proto"
)

// The client's side of reverse calls and server push: Requests and
// one-way messages the server sends on a connection run the handlers of
// Options.Handler, each on a goroutine of its own (a handler may call the
// server back and wait), and their replies go back on the same connection.
// One-way messages to routes the client has no handler for go to
// Options.Pushes.

// Push is a one-way message from the server to a route the client has no
// handler for, as Options.Pushes delivers it.
type Push struct {
	Route   string
	Codec   proto.Codec
	Payload []byte // the client's own copy
}

// serving is what a wire needs to serve the server's calls.
type serving struct {
	reg     *handler.Registry // nil: no routes
	pushes  chan<- Push       // nil: unhandled pushes are dropped
	max     int               // handlers running at once per connection
	peer    handler.Peer      // the client, for handlers that call back
	dropped func()            // counts a push Pushes had no room for
	subs    *subTable         // the client's subscriptions, for Message frames
	pubs    *publishRefusals  // the server's refusals of the client's publishes
	window  int               // the window granted to each stream (Options.StreamWindow)
	run     transport.Runner  // runs the server's calls and streams
}

// serverCalls are the handlers a wire is running for the server.
type serverCalls struct {
	mu      sync.Mutex
	running map[*handler.Call]bool // true for a Request, false for one-way
	wg      sync.WaitGroup
}

// serve acts on a Request or one-way message from the server: it runs its
// handler on a goroutine, refuses it, or hands it to Pushes. It runs on the
// goroutine reading the connection, so it copies what it keeps of f and
// never blocks.
func (w *wire) serve(f *proto.Frame) {
	oneWay := f.Kind == proto.KindOneWay
	if c := f.Flags.Compression(); c != proto.CompressionNone {
		payload, err := compression.Expand(nil, f.Payload, c, f.PayloadRoom(w.lim.MaxFrameSize))
		if err != nil {
			if !oneWay {
				w.enqueueAsync(proto.AppendError(nil, f.ID, proto.FlagUnprocessed, proto.CodeInvalidArgument, handler.MessageOf(err)))
			}
			return
		}
		g := *f
		g.Flags, g.Payload = g.Flags.WithCompression(proto.CompressionNone), payload
		f = &g
	}
	var rt *handler.Route
	if w.srv.reg != nil {
		rt = w.srv.reg.Lookup(f.Route)
	}
	if rt == nil {
		switch {
		case !oneWay:
			w.enqueueAsync(proto.AppendError(nil, f.ID, proto.FlagUnprocessed, proto.CodeNotFound, "the client has no route "+string(f.Route)))
		case w.srv.pushes != nil:
			select {
			case w.srv.pushes <- Push{Route: string(f.Route), Codec: f.Codec, Payload: append([]byte(nil), f.Payload...)}:
			default:
				w.srv.dropped()
			}
		}
		return
	}
	sc := &w.calls
	sc.mu.Lock()
	if len(sc.running) >= w.srv.max || w.dead() {
		sc.mu.Unlock()
		if !oneWay {
			w.enqueueAsync(proto.AppendError(nil, f.ID, proto.FlagUnprocessed, proto.CodeResourceExhausted, "too many calls from the server running on this client"))
		}
		return
	}
	// One copy of the sections the handler reads: the reader's buffer is
	// reused for the next frame.
	buf := make([]byte, len(f.Metadata)+len(f.Payload))
	copy(buf, f.Metadata)
	copy(buf[len(f.Metadata):], f.Payload)
	call := &handler.Call{
		Route:    rt.Name(),
		ID:       f.ID,
		Codec:    f.Codec,
		Metadata: proto.Metadata(buf[:len(f.Metadata):len(f.Metadata)]),
		Remote:   w.nc.RemoteAddr(),
		Peer:     w.srv.peer,
	}
	var deadline time.Time
	if f.Deadline > 0 {
		deadline = time.Now().Add(time.Duration(f.Deadline) * time.Millisecond)
	}
	call.Start(context.Background(), deadline)
	if sc.running == nil {
		sc.running = make(map[*handler.Call]bool)
	}
	sc.running[call] = !oneWay
	sc.wg.Add(1)
	sc.mu.Unlock()
	go w.runHandler(rt, call, buf[len(f.Metadata):], oneWay)
}

// runHandler runs one of the server's calls and sends its reply.
func (w *wire) runHandler(rt *handler.Route, call *handler.Call, req []byte, oneWay bool) {
	sc := &w.calls
	defer sc.wg.Done()
	out, _ := w.srv.run.Run(&transport.Job{Route: rt, Call: call, Req: req, OneWay: oneWay}, nil)
	sc.mu.Lock()
	delete(sc.running, call)
	sc.mu.Unlock()
	call.End()
	if oneWay || w.dead() {
		return
	}
	w.enqueueAsync(out)
	if w.goingAway.Load() {
		w.closeIfIdle()
	}
}

// cancelServed cancels the server's call id, if its handler still runs.
func (w *wire) cancelServed(id uint32) {
	sc := &w.calls
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for call, isRequest := range sc.running {
		if isRequest && call.ID == id {
			call.Cancel(context.Canceled)
		}
	}
}

// cancelAllServed cancels every handler still running for the server: the
// connection is gone, and their replies with it.
func (w *wire) cancelAllServed() {
	sc := &w.calls
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for call := range sc.running {
		call.Cancel(context.Canceled)
	}
}

// servedIdle reports whether no handler runs for the server.
func (w *wire) servedIdle() bool {
	sc := &w.calls
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return len(sc.running) == 0
}

// DroppedPushes is the number of one-way messages from the server that
// Options.Pushes had no room for.
func (c *Client) DroppedPushes() uint64 { return c.dropped.Load() }
