package engine

import (
	"context"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// Metadata is the metadata of a call made with ctx: what
// handler.WithMetadata put in ctx, then W3C trace context (traceparent,
// tracestate) and W3C baggage (docs/protocol.md, "Metadata"), each unless
// that metadata has it already. The trace context comes from, in order:
// handler.WithTraceContext in ctx; the metadata of the incoming call ctx
// is or wraps (handler.CallFrom), so that a handler that calls on with its
// own context passes its caller's trace on. Baggage comes the same way, on
// its own: handler.WithBaggage, then the incoming call's. A context with
// none of these costs the look-ups only: no allocation.
func Metadata(ctx context.Context) proto.Metadata {
	md := handler.OutgoingMetadata(ctx)
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
