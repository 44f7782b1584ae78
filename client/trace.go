package client

import (
	"context"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
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
// these carries none, and pays for the look-up only: no allocation.

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

// withTrace returns md with the trace context and baggage of ctx added,
// each unless md has it already. md is not modified: with something to
// add, the result is a new slice.
func withTrace(ctx context.Context, md proto.Metadata) proto.Metadata {
	var parent, state, bag []byte
	tcParent, tcState, tcBaggage, set := handler.TraceFrom(ctx)
	if set {
		parent, state, bag = []byte(tcParent), []byte(tcState), []byte(tcBaggage)
	}
	if !set || tcParent == "" || tcBaggage == "" {
		if call := handler.CallFrom(ctx); call != nil {
			if len(parent) == 0 {
				if parent, _ = call.Metadata.Get(proto.MetaTraceParent); len(parent) > 0 {
					state, _ = call.Metadata.Get(proto.MetaTraceState)
				}
			}
			if len(bag) == 0 {
				bag, _ = call.Metadata.Get(proto.MetaBaggage)
			}
		}
	}
	if len(parent) == 0 && len(bag) == 0 {
		return md
	}
	if len(parent) > 0xffff || len(state) > 0xffff {
		parent = nil
	}
	if _, ok := md.Get(proto.MetaTraceParent); ok {
		parent = nil
	}
	if _, ok := md.Get(proto.MetaBaggage); ok || len(bag) > 0xffff {
		bag = nil
	}
	if len(parent) == 0 && len(bag) == 0 {
		return md
	}
	out := make(proto.Metadata, 0, len(md)+3*(1+len(proto.MetaTraceState)+2)+len(parent)+len(state)+len(bag))
	out = append(out, md...)
	if len(parent) > 0 {
		out = proto.AppendMetadata(out, proto.MetaTraceParent, parent)
		if len(state) > 0 {
			out = proto.AppendMetadata(out, proto.MetaTraceState, state)
		}
	}
	if len(bag) > 0 {
		out = proto.AppendMetadata(out, proto.MetaBaggage, bag)
	}
	return out
}
