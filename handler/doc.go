// Package handler is rpcd's registry: routes, handlers, middleware, codecs,
// the per-call context and error codes as Go errors.
//
// A Registry maps routes to handlers. A raw handler (Handler, HandlerFunc)
// sees the request payload as it arrived and appends its reply to a buffer
// the transport owns: on the reactor's inline path the payload is a view
// into the connection's input buffer and nothing is copied or allocated. A
// typed handler, built with Func (or declared once for both ends with
// Method), takes and returns Go values encoded with the call's codec (JSON,
// by sonic, or one added with RegisterCodec). Middleware wraps every route
// (Registry.Use). A stream route (Registry.HandleStream) serves a
// flow-controlled Stream.
//
// A handler runs under a Call, its context.Context: the route, metadata,
// identity and deadline of the call, and the Peer at the other end of the
// connection. It fails with an *Error, whose code travels on the wire
// (Errorf, the Err sentinels, CodeOf). A route runs inline on an event loop
// unless it is registered with Blocking, and an inline handler must not
// wait: calls it makes through a client or its Peer that would wait for a
// reply are refused at once. A route whose inline runs keep passing their
// budget moves itself to the blocking pool, unless it is registered with
// Inline.
//
// It knows no transport. The same Registry serves calls read by the gnet
// reactor, the HTTP gateway, a test, or a client that accepts calls from
// its server.
//
// Two packages sit beside it. Package handler/schema says what a route
// takes and answers: its kind and, for a typed route, the JSON Schemas of
// its argument and its reply, derived from its Go types. Package
// handler/transport is for whoever carries calls to a Registry rather than
// whoever writes handlers: its Runner runs a call's lifecycle (middleware,
// panics, the frame limit, the error frame, the inline budget and the
// watchdog's marks), and its helpers make calls on either side of a
// connection. A transport also uses, of this package, Registry.Lookup,
// LookupCached (with a RouteCache) and LookupStream, Route.ServeOwn and
// IsBlocking, and Call.Start, End and Cancel, which stay here because they
// reach the registry's and the Call's own state at every call.
package handler
