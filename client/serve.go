package client

import (
	"context"
	"sync"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/internal/engine"
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
	run     transport.Runner  // runs the server's calls and streams
	streams engine.StreamConfig
}

// serverCalls are the handlers a wire is running for the server.
type serverCalls struct {
	mu      sync.Mutex
	running engine.Running
	wg      sync.WaitGroup
}

// serve acts on a Request or one-way message from the server: it runs its
// handler on a goroutine, refuses it, or hands it to Pushes. It runs on the
// goroutine reading the connection, so it copies what it keeps of f and
// never blocks.
func (w *wire) serve(f *proto.Frame) {
	oneWay := f.Kind == proto.KindOneWay
	if z := f.Flags.Compression(); z != proto.CompressionNone {
		payload, err := engine.ExpandRequest(nil, f.Payload, z, f.PayloadRoom(w.lim.MaxFrameSize))
		if err != nil {
			if !oneWay {
				w.enqueueAsync(proto.AppendError(nil, f.ID, proto.FlagUnprocessed, err.Code, err.Message))
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
	call := &handler.Call{Remote: w.nc.RemoteAddr(), Peer: w.srv.peer}
	sc.mu.Lock()
	if err := sc.running.Add(f.ID, call, w.srv.max); err != nil { // closed once w fails
		sc.mu.Unlock()
		if !oneWay {
			w.enqueueAsync(proto.AppendError(nil, f.ID, proto.FlagUnprocessed, err.Code, err.Message))
		}
		return
	}
	sc.wg.Add(1)
	sc.mu.Unlock()
	// One copy of the sections the handler reads: the reader's buffer is
	// reused for the next frame.
	_, md, req := engine.Copy(nil, f)
	engine.Start(call, rt.Name(), &f.Header, md, context.Background(), time.Now())
	go w.runHandler(rt, call, req, oneWay)
}

// runHandler runs one of the server's calls and sends its reply.
func (w *wire) runHandler(rt *handler.Route, call *handler.Call, req []byte, oneWay bool) {
	sc := &w.calls
	defer sc.wg.Done()
	out, _ := w.srv.run.Run(&transport.Job{Route: rt, Call: call, Req: req, OneWay: oneWay}, nil)
	sc.mu.Lock()
	sc.running.Remove(call.ID)
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
	sc.running.Cancel(id)
	sc.mu.Unlock()
}

// cancelAllServed cancels every handler still running for the server: the
// connection is gone, and their replies with it.
func (w *wire) cancelAllServed() {
	sc := &w.calls
	sc.mu.Lock()
	sc.running.Close()
	sc.mu.Unlock()
}

// servedIdle reports whether no handler runs for the server.
func (w *wire) servedIdle() bool {
	sc := &w.calls
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.running.Len() == 0
}

// DroppedPushes is the number of one-way messages from the server that
// Options.Pushes had no room for.
func (c *Client) DroppedPushes() uint64 { return c.dropped.Load() }
