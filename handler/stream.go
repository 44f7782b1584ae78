package handler

import (
	"context"
	"runtime/debug"
	"sort"

	"github.com/rpcd/rpcd/internal/handlerstate"
	"github.com/rpcd/rpcd/proto"
)

// Stream is one flow-controlled stream between the two ends of a
// connection (docs/streams.md), seen from either end: the stream a handler
// registered with Registry.HandleStream serves, or the one a caller opened
// with OpenStream. Each direction carries bytes; the receiver grants a
// window of them, so a Write waits while the other end has not read what
// it was sent, and neither end ever buffers more than its window.
//
// Read and Write may run at the same time on two goroutines; two Reads,
// or two Writes, may not.
type Stream interface {
	// Context is the stream's context: for a handler, the call's (its
	// route, metadata, identity and deadline; cancelled when the opener
	// cancels, the deadline passes or the connection closes); for an
	// opener, the context it opened the stream with.
	Context() context.Context

	// Read reads bytes the other end sent, waiting for some. After the
	// other end's CloseSend and the last byte, it returns io.EOF; after a
	// failure (a reset, a lost connection, a cancelled context) the error,
	// a *Error with its code.
	Read(p []byte) (int, error)

	// Write sends p, waiting for window as needed. It returns io.EOF if the
	// handler at the other end returned before reading everything, and the
	// stream's error if it failed.
	Write(p []byte) (int, error)

	// CloseSend ends this end's direction: the other end reads io.EOF once
	// it has read everything before it. Reading goes on.
	CloseSend() error

	// Close finishes the stream for this end. An opener's Close waits for
	// the handler's outcome once both directions have ended, and returns
	// it (nil when the handler returned nil); before then, it cancels the
	// stream (the handler's context ends) and returns nil. In a handler,
	// Close is CloseSend: the handler's return finishes the stream.
	Close() error
}

// StreamHandler serves one stream opened to its route. It runs on a
// goroutine of its own (never on an event loop), and the stream is
// finished when it returns: a nil error reaches the opener as a clean end,
// any other error as a *Error with its code.
type StreamHandler func(ctx context.Context, s Stream) error

// StreamOpener opens streams to the stream routes of the other end of a
// connection: *client.Client opens them to its server, and the handle a
// server gives its handlers in Call.Peer (*reactor.Peer) to the client.
type StreamOpener interface {
	OpenStream(ctx context.Context, route string) (Stream, error)
}

// StreamRoute is a registered stream route.
type StreamRoute struct {
	name string
	h    StreamHandler
	reg  *Registry
}

// HandleStream registers h for stream route route, which lives beside the
// call routes (a Request to it is answered NotFound, as a stream opened to
// a call route is). The registry's middleware (Use) wraps each stream as
// if it were a call, before the handler starts: authorization refuses a
// stream the same way it refuses a call. HandleStream panics if the name
// is not valid or is taken.
func (r *Registry) HandleStream(route string, h StreamHandler) {
	if err := ValidRoute(route); err != nil {
		panic(err)
	}
	if h == nil {
		panic("rpcd: nil stream handler for route " + route)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var old map[string]*StreamRoute
	if p := r.streams.Load(); p != nil {
		old = *p
	}
	if _, dup := old[route]; dup {
		panic("rpcd: stream route " + route + " registered twice")
	}
	next := make(map[string]*StreamRoute, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[route] = &StreamRoute{name: route, h: h, reg: r}
	r.streams.Store(&next)
}

// LookupStream returns the stream route named by the bytes of name, or nil.
func (r *Registry) LookupStream(name []byte) *StreamRoute {
	p := r.streams.Load()
	if p == nil {
		return nil
	}
	return (*p)[string(name)]
}

// StreamRoutes lists the registered stream routes, sorted by name.
func (r *Registry) StreamRoutes() []string {
	p := r.streams.Load()
	if p == nil {
		return nil
	}
	out := make([]string, 0, len(*p))
	for name := range *p {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Name returns the stream route's name.
func (rt *StreamRoute) Name() string { return rt.name }

// StreamFrom returns the stream ctx carries, or nil: under a stream
// route's handler, and the middleware around it, the stream being served
// (a transport puts it there, transport.WithStream).
func StreamFrom(ctx context.Context) Stream {
	s, _ := ctx.Value(handlerstate.StreamKey{}).(Stream)
	return s
}

// ServeStream runs the route's handler on s under the registry's
// middleware, with ctx (a *Call whose parent came from
// transport.WithStream). A panic in the handler is returned as a
// *PanicError.
func (rt *StreamRoute) ServeStream(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{Route: rt.name, Value: p, Stack: debug.Stack()}
		}
	}()
	rt.reg.mu.Lock()
	mws := rt.reg.mws
	rt.reg.mu.Unlock()
	h := Chain(HandlerFunc(rt.serve), mws...)
	_, err = h.ServeRPC(ctx, nil, nil)
	return err
}

// serve is the stream handler seen as a call's handler, for middleware.
func (rt *StreamRoute) serve(ctx context.Context, _, reply []byte) ([]byte, error) {
	s := StreamFrom(ctx)
	if s == nil {
		return reply, &Error{Code: proto.CodeUnimplemented, Message: "route " + rt.name + " is a stream route: open it as a stream", Unprocessed: true}
	}
	return reply, rt.h(ctx, s)
}
