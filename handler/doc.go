// Package handler is rpcd's registry: routes, handlers, middleware, codecs,
// the per-call context and error codes as Go errors.
//
// It knows no transport. The same Registry serves calls read by the gnet
// reactor, a test, or a client that accepts calls from its server. A
// transport looks a route up with Registry.Lookup, fills in a Call (the
// handler's context.Context) and runs Route.Serve, which turns a panic into
// an Internal error.
//
// Raw handlers see the request payload as it arrived and append their reply
// to a buffer the transport owns: on the reactor's inline path the payload is
// a view into the connection's input buffer and nothing is copied or
// allocated. Typed handlers, built with Func, take and return Go values
// encoded with the call's codec (JSON, by sonic).
package handler
