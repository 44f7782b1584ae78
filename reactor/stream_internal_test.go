package reactor

import (
	"context"
	"testing"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
)

// TestInlineRawPathAllocsWithStreams: with a stream open on the
// connection and stream frames in the same wake-ups as the calls, the
// raw path still allocates nothing: the loop's share of a stream (a table
// lookup, the stream's state) allocates nothing per frame.
func TestInlineRawPathAllocsWithStreams(t *testing.T) {
	reg := handler.NewRegistry()
	builtin.Register(reg)
	started := make(chan struct{})
	reg.HandleStream("Hold", func(ctx context.Context, s handler.Stream) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})
	s := New(reg, Options{})
	fc := &fakeConn{}
	w := &countingConn{fakeConn: fc, record: true}
	if _, action := s.ev.OnOpen(w); action != 0 {
		t.Fatal("OnOpen refused the connection")
	}
	fc.in = proto.AppendStreamOpen(nil, 1, "Hold", proto.CodecRaw, 0, nil, 1<<20)
	s.ev.OnTraffic(w)
	<-started
	if fs := decodeAll(t, fc.writes[0]); len(fs) != 1 || fs[0].Kind != proto.KindStreamCredit {
		t.Fatalf("StreamOpen answered with %+v, want a StreamCredit", fs)
	}
	w.record = false
	t.Cleanup(func() { s.ev.OnClose(w, nil) }) // ends the handler

	var batch []byte
	for i := 1; i <= 16; i++ {
		batch = proto.AppendFrame(batch, proto.Header{Kind: proto.KindRequest, ID: uint32(i)}, builtin.EchoPacket, nil, make([]byte, 16))
		batch = proto.AppendStreamCredit(batch, 1, 1)             // to the open stream
		batch = proto.AppendStreamData(batch, 99, []byte("late")) // to a finished one: dropped
	}
	allocs := testing.AllocsPerRun(500, func() {
		fc.in = batch
		s.ev.OnTraffic(w)
	})
	if allocs != 0 {
		t.Fatalf("%.2f allocations per wake-up of 16 calls and 32 stream frames, want 0", allocs)
	}
	if w.n == 0 {
		t.Fatal("nothing written")
	}
}
