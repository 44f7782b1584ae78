package client

import (
	"context"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// Calls carry W3C trace context (docs/protocol.md, "Metadata") under the
// metadata keys traceparent and tracestate. A call takes them from, in
// order: metadata its context already has under traceparent
// (WithMetadata); the trace context WithTraceContext put in its context;
// the metadata of the incoming call its context is or wraps, so that a
// handler that calls on with its own context passes its caller's trace on
// with no code of its own. A call whose context has none of these carries
// none, and pays for the look-up only: no allocation.

type traceKey struct{}

// traceContext is a trace context set by WithTraceContext.
type traceContext struct {
	parent, state string
}

// WithTraceContext returns a context whose calls carry traceparent, and
// tracestate if it is not empty, as their trace context, in place of one
// passed on from an incoming call. otelrpcd.Inject sets it from an
// OpenTelemetry span; the values are sent as given.
func WithTraceContext(ctx context.Context, traceparent, tracestate string) context.Context {
	return context.WithValue(ctx, traceKey{}, traceContext{traceparent, tracestate})
}

// withTrace returns md with the trace context of ctx added, unless md has
// a traceparent already. md is not modified: with something to add, the
// result is a new slice.
func withTrace(ctx context.Context, md proto.Metadata) proto.Metadata {
	var parent, state []byte
	if tc, ok := ctx.Value(traceKey{}).(traceContext); ok {
		parent, state = []byte(tc.parent), []byte(tc.state)
	} else if call := handler.CallFrom(ctx); call != nil {
		var ok bool
		if parent, ok = call.Metadata.Get(proto.MetaTraceParent); !ok {
			return md
		}
		state, _ = call.Metadata.Get(proto.MetaTraceState)
	} else {
		return md
	}
	if len(parent) == 0 || len(parent) > 0xffff || len(state) > 0xffff {
		return md
	}
	if _, ok := md.Get(proto.MetaTraceParent); ok {
		return md
	}
	out := make(proto.Metadata, 0, len(md)+2*(1+len(proto.MetaTraceState)+2)+len(parent)+len(state))
	out = append(out, md...)
	out = proto.AppendMetadata(out, proto.MetaTraceParent, parent)
	if len(state) > 0 {
		out = proto.AppendMetadata(out, proto.MetaTraceState, state)
	}
	return out
}
