// Package transport is the side of package handler that whoever carries
// calls to a handler.Registry uses, rather than whoever writes handlers:
// rpcd's reactor, client, gateway and ws, and a program that serves a
// registry behind a transport of its own.
//
// Serving: a transport looks a route up (Registry.Lookup, or
// Registry.LookupCached with a handler.RouteCache), fills in and starts a
// handler.Call (Call.Start; CancelWhen, for calls that end with a context
// of the transport's, as the gateway's with their request), and hands a
// Job to its Runner, the one place
// a call's lifecycle is run: the handler under the registry's middleware,
// a panic turned into an Internal error and logged with its stack, the
// reply held to the frame limit, a failure answered with its code
// (AnswersUnprocessed says whether with the Unprocessed flag), and, for a
// call run inline on an event loop, the marks a watchdog reads (Watch,
// Runner.Check) and the timing that moves a route whose inline runs keep
// passing their budget (DefaultInlineBudget) to the blocking pool. A
// stream handler's Call starts under WithStream, and Runner.Stream runs
// it. CodeSlot and CodeSlots index counters by error code.
//
// Calling: a caller on either side of a connection refuses to wait from
// an inline handler's context (RefuseWait), encodes the argument
// (AppendArgWith), decodes the reply (DecodeReplyWith), and marks every
// error it returns (Received), so that a handler that returns it does not
// answer its own call Unprocessed.
//
// Recording: a Tap sees a server's connections' frames whole, as on the
// wire, in both directions (reactor.Server.SetTap feeds it; package
// record implements it).
package transport
