package reactor

import (
	"testing"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/metrics"
	"github.com/rpcd/rpcd/proto"
)

// newMetricsServer is newTestServer with every route counted by a
// metrics.Metrics, as rpcd serve -admin runs: the middleware first, then
// the routes.
func newMetricsServer(t testing.TB) (*Server, *fakeConn, *metrics.Metrics) {
	m := metrics.New()
	reg := handler.NewRegistry()
	reg.Use(m.Middleware())
	builtin.Register(reg)
	s := New(reg, Options{})
	fc := &fakeConn{}
	if _, action := s.ev.OnOpen(fc); action != 0 {
		t.Fatal("OnOpen refused the connection")
	}
	return s, fc, m
}

// TestInlineRawPathAllocsWithMetrics: with calls counted by route (the
// metrics middleware) and the server's own counters, the raw path still
// allocates nothing per call, and every call is counted.
func TestInlineRawPathAllocsWithMetrics(t *testing.T) {
	s, fc, m := newMetricsServer(t)
	var batch []byte
	for i := 1; i <= 16; i++ {
		batch = proto.AppendFrame(batch, proto.Header{Kind: proto.KindRequest, ID: uint32(i), Deadline: 1000}, builtin.EchoPacket, nil, make([]byte, 16))
		batch = proto.AppendFrame(batch, proto.Header{Kind: proto.KindRequest, ID: uint32(i)}, builtin.NoArg, nil, nil)
	}
	w := &countingConn{fakeConn: fc}
	s.ev.OnOpen(w) // the connection writes through w
	const runs = 500
	allocs := testing.AllocsPerRun(runs, func() {
		fc.in = batch
		s.ev.OnTraffic(w)
	})
	if allocs != 0 {
		t.Fatalf("%.2f allocations per wake-up of 32 counted calls, want 0", allocs)
	}
	// AllocsPerRun runs the function once more to warm up.
	for _, r := range m.Snapshot() {
		if r.Calls[0] != 16*(runs+1) || r.Total() != r.Calls[0] {
			t.Fatalf("%s: %d calls counted OK of %d, want %d", r.Route, r.Calls[0], r.Total(), 16*(runs+1))
		}
	}
	if st := s.Stats(); st.BytesIn != uint64(len(batch))*(runs+1) {
		t.Fatalf("%d bytes in counted, want %d", st.BytesIn, len(batch)*(runs+1))
	}
}

// BenchmarkDirectMetrics is BenchmarkDirect's raw case with and without
// the metrics middleware, side by side, so that their difference is what
// counting costs a call:
//
//	go test -run '^$' -bench DirectMetrics -count 6 ./reactor
func BenchmarkDirectMetrics(b *testing.B) {
	for _, bc := range []struct {
		name    string
		metrics bool
	}{{"Off", false}, {"On", true}} {
		b.Run(bc.name, func(b *testing.B) {
			var s *Server
			if bc.metrics {
				s, _, _ = newMetricsServer(b)
			} else {
				s, _ = newTestServer(b)
			}
			benchDirect(b, s, builtin.EchoPacket, proto.CodecRaw, make([]byte, 16), 32)
		})
	}
}
