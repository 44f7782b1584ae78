package engine

import (
	"context"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

type otherKey struct{}

// TestMetadata checks where a call's trace context and baggage come from:
// metadata set with WithMetadata, then WithTraceContext and WithBaggage,
// then the incoming call; each on its own.
func TestMetadata(t *testing.T) {
	const (
		tpIn  = "00-11111111111111111111111111111111-1111111111111111-01"
		tpSet = "00-22222222222222222222222222222222-2222222222222222-01"
		tpMD  = "00-33333333333333333333333333333333-3333333333333333-01"
	)
	incoming := &handler.Call{Route: "In/Coming"}
	incoming.Metadata = proto.AppendMetadata(proto.AppendMetadata(nil, proto.MetaTraceParent, []byte(tpIn)), proto.MetaTraceState, []byte("k=v"))
	incoming.Metadata = proto.AppendMetadata(incoming.Metadata, proto.MetaBaggage, []byte("tenant=in"))
	incoming.Start(context.Background(), time.Time{})
	defer incoming.End()

	get := func(md proto.Metadata, key string) string { v, _ := md.Get(key); return string(v) }
	cases := []struct {
		name             string
		ctx              context.Context
		parent, sta, bag string
		entries          int
	}{
		{"nothing", context.Background(), "", "", "", 0},
		{"incoming call", incoming, tpIn, "k=v", "tenant=in", 3},
		{"wrapped incoming call", context.WithValue(incoming, otherKey{}, 1), tpIn, "k=v", "tenant=in", 3},
		{"WithTraceContext over the incoming call", handler.WithTraceContext(incoming, tpSet, ""), tpSet, "", "tenant=in", 2},
		{"WithBaggage over the incoming call", handler.WithBaggage(incoming, "tenant=set"), tpIn, "k=v", "tenant=set", 3},
		{"WithBaggage and WithTraceContext", handler.WithTraceContext(handler.WithBaggage(incoming, "tenant=set"), tpSet, "x=y"), tpSet, "x=y", "tenant=set", 3},
		{"WithBaggage alone", handler.WithBaggage(context.Background(), "tenant=set"), "", "", "tenant=set", 1},
		{"WithMetadata over both", handler.WithMetadata(handler.WithTraceContext(incoming, tpSet, "x=y"), proto.MetaTraceParent, tpMD), tpMD, "", "tenant=in", 2},
		{"baggage in WithMetadata", handler.WithMetadata(handler.WithBaggage(incoming, "tenant=set"), proto.MetaBaggage, "tenant=md"), tpIn, "k=v", "tenant=md", 3},
		{"other metadata kept", handler.WithMetadata(incoming, "tenant", "acme"), tpIn, "k=v", "tenant=in", 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := append(proto.Metadata(nil), handler.OutgoingMetadata(tc.ctx)...)
			md := Metadata(tc.ctx)
			if got := get(md, proto.MetaTraceParent); got != tc.parent {
				t.Errorf("traceparent %q, want %q", got, tc.parent)
			}
			if got := get(md, proto.MetaTraceState); got != tc.sta {
				t.Errorf("tracestate %q, want %q", got, tc.sta)
			}
			if got := get(md, proto.MetaBaggage); got != tc.bag {
				t.Errorf("baggage %q, want %q", got, tc.bag)
			}
			if n := md.Len(); n != tc.entries {
				t.Errorf("%d entries, want %d", n, tc.entries)
			}
			if string(handler.OutgoingMetadata(tc.ctx)) != string(before) {
				t.Error("the context's metadata was modified")
			}
		})
	}
	allocs := testing.AllocsPerRun(100, func() { _ = Metadata(context.Background()) })
	if allocs != 0 {
		t.Errorf("%.1f allocations without a trace, want 0", allocs)
	}
}
