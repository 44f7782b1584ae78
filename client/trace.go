package client

import (
	"context"

	"github.com/rpcd/rpcd/handler"
)

// Calls carry W3C trace context (docs/protocol.md, "Metadata") under the
// metadata keys traceparent and tracestate, and W3C baggage under baggage.
// A call takes its trace context from, in order: metadata its context
// already has under traceparent (WithMetadata); the trace context
// WithTraceContext put in its context; the metadata of the incoming call
// its context is or wraps, so that a handler that calls on with its own
// context passes its caller's trace on with no code of its own. Its
// baggage comes the same way, on its own: metadata under baggage, then
// WithBaggage, then the incoming call's. A call whose context has none of
// these carries none, and pays for the look-up only: no allocation. A
// server's calls to its client (through handler.Call.Peer) follow the same
// rules: both build their metadata with internal/engine's Metadata.

// WithTraceContext returns a context whose calls carry traceparent, and
// tracestate if it is not empty, as their trace context, in place of one
// passed on from an incoming call: handler.WithTraceContext, which
// otelrpcd.Inject sets from an OpenTelemetry span.
func WithTraceContext(ctx context.Context, traceparent, tracestate string) context.Context {
	return handler.WithTraceContext(ctx, traceparent, tracestate)
}

// WithBaggage returns a context whose calls carry baggage, W3C Baggage in
// its text form, in place of the baggage passed on from an incoming call:
// handler.WithBaggage, which otelrpcd.Inject sets from OpenTelemetry's
// baggage.
func WithBaggage(ctx context.Context, baggage string) context.Context {
	return handler.WithBaggage(ctx, baggage)
}
