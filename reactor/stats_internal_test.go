package reactor

import (
	"testing"

	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
)

// TestWakeUpWritesNoServerCounter: a wake-up counts its bytes on its
// connection, not in the server's counters, which every event loop would
// write (BenchmarkDirectWake with -cpu 2 shows what that cost); Stats still
// adds them up, and a closed connection's bytes move to the server's.
func TestWakeUpWritesNoServerCounter(t *testing.T) {
	s, fc := newTestServer(t)
	in := proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, Codec: proto.CodecRaw, ID: 1}, builtin.EchoPacket, nil, []byte("sixteen bytes..."))
	fc.in = in
	s.ev.OnTraffic(fc)
	if len(fc.writes) != 1 {
		t.Fatalf("%d writes, want the reply's one", len(fc.writes))
	}
	out := len(fc.writes[0])
	if a, b := s.stats.bytesIn.Load(), s.stats.bytesOut.Load(); a != 0 || b != 0 {
		t.Fatalf("a wake-up wrote the server's counters: %d in, %d out", a, b)
	}
	if st := s.Stats(); st.BytesIn != uint64(len(in)) || st.BytesOut != uint64(out) {
		t.Fatalf("Stats: %d in, %d out; want %d and %d", st.BytesIn, st.BytesOut, len(in), out)
	}
	s.ev.OnClose(fc, nil)
	if a, b := s.stats.bytesIn.Load(), s.stats.bytesOut.Load(); a != uint64(len(in)) || b != uint64(out) {
		t.Fatalf("the closed connection's bytes: %d in, %d out; want %d and %d", a, b, len(in), out)
	}
	if st := s.Stats(); st.BytesIn != uint64(len(in)) || st.BytesOut != uint64(out) || st.Conns != 0 {
		t.Fatalf("Stats once closed: %+v", st)
	}
}
