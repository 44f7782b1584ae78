package handler

import "context"

// Handler serves calls to one route.
//
// ServeRPC gets the request payload in req and appends its reply payload to
// reply, an empty slice over a buffer the transport owns, returning the
// result as append does: a reply that fits the spare capacity costs no copy
// and no allocation. Any other slice may be returned, req itself among them
// (an echo): the transport copies it, or writes a large one from where it
// is, so the handler leaves it unchanged once returned. req is valid only
// until ServeRPC returns, and so is ctx (a *Call); a handler that keeps
// either copies what it needs.
//
// A non-nil error becomes an Error frame, its code from CodeOf, and the reply
// is dropped.
type Handler interface {
	ServeRPC(ctx context.Context, req []byte, reply []byte) ([]byte, error)
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, req []byte, reply []byte) ([]byte, error)

// ServeRPC calls f(ctx, req, reply).
func (f HandlerFunc) ServeRPC(ctx context.Context, req []byte, reply []byte) ([]byte, error) {
	return f(ctx, req, reply)
}

// Middleware wraps a handler with behaviour of its own: logging, auth,
// metrics. The route is available from the context with CallFrom.
type Middleware func(next Handler) Handler

// Chain returns h wrapped by mws, the first outermost.
func Chain(h Handler, mws ...Middleware) Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}
