// Package handler is rpcd's registry: routes, handlers, middleware, codecs,
// the per-call context and error codes as Go errors.
//
// It knows no transport. The same Registry serves calls read by the gnet
// reactor, the HTTP gateway, a test, or a client that accepts calls from
// its server. A transport looks a route up with Registry.Lookup, fills in a
// Call (the handler's context.Context) and hands the call to its Runner,
// the one place a call's lifecycle is run: the handler under the
// registry's middleware, a panic turned into an Internal error and logged
// with its stack, the reply held to the frame limit, a failure answered
// with its code; and, for a call run inline on an event loop, the marks a
// watchdog reads (Runner.Check) and the timing that moves a route whose
// inline runs keep passing their budget to the blocking pool.
//
// An inline handler must not wait: RefuseWait, which clients and peers
// call before a call that waits for a reply, refuses such calls from an
// inline handler's context at once.
//
// Raw handlers see the request payload as it arrived and append their reply
// to a buffer the transport owns: on the reactor's inline path the payload is
// a view into the connection's input buffer and nothing is copied or
// allocated. Typed handlers, built with Func, take and return Go values
// encoded with the call's codec (JSON, by sonic). Package handler/schema
// says what a route takes and answers: its kind and, for a typed route,
// the JSON Schemas of its argument and its reply, derived from its Go
// types on the first description.
//
// # For transports
//
// Some exports serve whoever carries calls to a Registry rather than
// whoever writes handlers: Runner and Job (running a call), Watch (an
// inline run's marks), RouteCache (a connection's route lookups),
// WithStream (a stream handler's context), RefuseWait, and CodeSlot and
// CodeSlots (error counters by code). rpcd's reactor, gateway and ws use
// them, and so may a program that serves the registry behind a transport
// of its own.
package handler
