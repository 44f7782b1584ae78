package handler

import "context"

// A call carries W3C trace context (docs/protocol.md, "Metadata") under
// the metadata keys traceparent and tracestate, and W3C baggage under
// baggage. WithTraceContext and WithBaggage put them in a context, for the
// calls made with it (rpcd's client reads them there, and so does
// otelrpcd, which sets them from OpenTelemetry's span and baggage); a call
// made from a handler's context without them passes on those of the call
// it serves.

type traceKey struct{}

// traceContext is what WithTraceContext and WithBaggage set.
type traceContext struct {
	parent, state, baggage string
}

// WithTraceContext returns a context whose calls carry traceparent, and
// tracestate if it is not empty, as their trace context, in place of one
// passed on from an incoming call. The values are sent as given.
func WithTraceContext(ctx context.Context, traceparent, tracestate string) context.Context {
	tc, _ := ctx.Value(traceKey{}).(traceContext)
	tc.parent, tc.state = traceparent, tracestate
	return context.WithValue(ctx, traceKey{}, tc)
}

// WithBaggage returns a context whose calls carry baggage, W3C Baggage in
// its text form ("k1=v1,k2=v2;prop"), under the metadata key baggage, in
// place of the baggage passed on from an incoming call. The value is sent
// as given.
func WithBaggage(ctx context.Context, baggage string) context.Context {
	tc, _ := ctx.Value(traceKey{}).(traceContext)
	tc.baggage = baggage
	return context.WithValue(ctx, traceKey{}, tc)
}

// TraceFrom returns the trace context and baggage WithTraceContext and
// WithBaggage put in ctx; ok is false if neither did.
func TraceFrom(ctx context.Context) (traceparent, tracestate, baggage string, ok bool) {
	tc, ok := ctx.Value(traceKey{}).(traceContext)
	return tc.parent, tc.state, tc.baggage, ok
}
