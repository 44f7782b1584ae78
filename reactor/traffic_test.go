package reactor

import (
	"bytes"
	"context"
	"testing"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/proto"
)

// newTestServer returns a server that has not started, with the built-in
// routes, and a connection to feed frames into.
func newTestServer(t testing.TB) (*Server, *fakeConn) {
	reg := handler.NewRegistry()
	builtin.Register(reg)
	s := New(reg, Options{})
	fc := &fakeConn{}
	if _, action := s.ev.OnOpen(fc); action != 0 {
		t.Fatal("OnOpen refused the connection")
	}
	return s, fc
}

func decodeAll(t testing.TB, b []byte) []proto.Frame {
	t.Helper()
	var fs []proto.Frame
	for len(b) > 0 {
		f, n, err := proto.Decode(b, nil)
		if err != nil || n == 0 {
			t.Fatalf("bad reply stream: n %d, err %v", n, err)
		}
		fs = append(fs, f)
		b = b[n:]
	}
	return fs
}

// TestOneWritePerWakeup: a wake-up with many frames answers them all with a
// single Write.
func TestOneWritePerWakeup(t *testing.T) {
	s, fc := newTestServer(t)
	const n = 100
	for i := 1; i <= n; i++ {
		fc.in = proto.AppendFrame(fc.in, proto.Header{Kind: proto.KindRequest, ID: uint32(i)}, builtin.EchoPacket, nil, []byte{byte(i)})
	}
	fc.in = proto.AppendFrame(fc.in, proto.Header{Kind: proto.KindRequest, ID: n + 1}, "No/Such", nil, nil)
	fc.in = proto.AppendPing(fc.in, []byte("p"))
	partial := proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: n + 2}, builtin.EchoPacket, nil, []byte("later"))
	fc.in = append(fc.in, partial[:30]...)

	if action := s.ev.OnTraffic(fc); action != 0 {
		t.Fatalf("action %v", action)
	}
	if len(fc.writes) != 1 {
		t.Fatalf("%d writes for one wake-up, want 1", len(fc.writes))
	}
	fs := decodeAll(t, fc.writes[0])
	if len(fs) != n+2 {
		t.Fatalf("%d replies, want %d", len(fs), n+2)
	}
	for i, f := range fs[:n] {
		if f.Kind != proto.KindResponse || f.ID != uint32(i+1) || len(f.Payload) != 1 || f.Payload[0] != byte(i+1) {
			t.Fatalf("reply %d: %v id %d payload % x", i, f.Kind, f.ID, f.Payload)
		}
	}
	if f := fs[n]; f.Kind != proto.KindError || f.Flags != proto.FlagUnprocessed {
		t.Fatalf("unknown route answered with %v flags %v", f.Kind, f.Flags)
	} else if code, _ := f.ErrorBody(); code != proto.CodeNotFound {
		t.Fatalf("unknown route code %v", code)
	}
	if f := fs[n+1]; f.Kind != proto.KindPong || string(f.Payload) != "p" {
		t.Fatalf("ping answered with %v %q", f.Kind, f.Payload)
	}
	if len(fc.in) != 30 {
		t.Fatalf("the partial frame was consumed: %d bytes left", len(fc.in))
	}
	fc.in = append(fc.in, partial[30:]...)
	fc.writes = nil
	s.ev.OnTraffic(fc)
	if fs := decodeAll(t, fc.writes[0]); len(fs) != 1 || string(fs[0].Payload) != "later" {
		t.Fatalf("completed frame answered with %+v", fs)
	}
}

func TestProtocolErrorClosesAfterGoAway(t *testing.T) {
	s, fc := newTestServer(t)
	fc.in = proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 7}, builtin.EchoPacket, nil, []byte("ok"))
	fc.in = append(fc.in, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"...)
	if action := s.ev.OnTraffic(fc); action == 0 {
		t.Fatal("connection left open after garbage")
	}
	fs := decodeAll(t, fc.writes[0])
	if len(fs) != 2 || fs[0].Kind != proto.KindResponse || fs[1].Kind != proto.KindGoAway {
		t.Fatalf("replies %+v", fs)
	}
	last, code, msg := fs[1].GoAwayBody()
	if last != 7 || code != proto.CodeInternal || len(msg) == 0 {
		t.Fatalf("go-away last %d code %v msg %q", last, code, msg)
	}
}

func TestReplyOverFrameLimit(t *testing.T) {
	reg := handler.NewRegistry()
	reg.HandleFunc("Big/Reply", func(_ context.Context, _, reply []byte) ([]byte, error) {
		return append(reply, make([]byte, 2048)...), nil
	})
	s := New(reg, Options{Limits: proto.Limits{MaxFrameSize: 1024}})
	fc := &fakeConn{}
	s.ev.OnOpen(fc)
	fc.in = proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, "Big/Reply", nil, nil)
	s.ev.OnTraffic(fc)
	fs := decodeAll(t, fc.writes[0])
	if code, msg := fs[0].ErrorBody(); fs[0].Kind != proto.KindError || code != proto.CodeResourceExhausted {
		t.Fatalf("oversized reply answered with %v %v %q", fs[0].Kind, code, msg)
	}
}

// TestInlineRawPathAllocs: the server's raw path, parse to reply, allocates
// nothing per call; with a tap set that discards what it sees too (the
// tap is handed views of the frames read and of the wake-up's output).
func TestInlineRawPathAllocs(t *testing.T) {
	for _, tc := range []struct {
		name string
		tap  transport.Tap
	}{{"no tap", nil}, {"a tap", nopTap{}}} {
		t.Run(tc.name, func(t *testing.T) {
			s, fc := newTestServer(t)
			if tc.tap != nil {
				s.SetTap(tc.tap)
			}
			var batch []byte
			for i := 1; i <= 16; i++ {
				batch = proto.AppendFrame(batch, proto.Header{Kind: proto.KindRequest, ID: uint32(i), Deadline: 1000}, builtin.EchoPacket, nil, make([]byte, 16))
				batch = proto.AppendFrame(batch, proto.Header{Kind: proto.KindRequest, ID: uint32(i)}, builtin.NoArg, nil, nil)
			}
			w := &countingConn{fakeConn: fc}
			s.ev.OnOpen(w) // the connection writes through w
			allocs := testing.AllocsPerRun(500, func() {
				fc.in = batch
				s.ev.OnTraffic(w)
			})
			if allocs != 0 {
				t.Fatalf("%.2f allocations per wake-up of 32 calls, want 0", allocs)
			}
			if w.n == 0 {
				t.Fatal("nothing written")
			}
		})
	}
}

// countingConn counts writes without keeping them, so the test's own
// bookkeeping does not allocate.
type countingConn struct {
	*fakeConn
	n      int
	record bool // keep the writes after all, as fakeConn does
}

func (c *countingConn) Write(b []byte) (int, error) {
	if c.record {
		return c.fakeConn.Write(b)
	}
	c.n++
	return len(b), nil
}

func TestDrainingRefusesNewCalls(t *testing.T) {
	s, fc := newTestServer(t)
	s.draining.Store(true)
	fc.in = proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 3}, builtin.EchoPacket, nil, nil)
	s.ev.OnTraffic(fc)
	fs := decodeAll(t, fc.writes[0])
	if len(fs) != 2 || fs[0].Kind != proto.KindGoAway || fs[1].Kind != proto.KindError {
		t.Fatalf("replies while draining: %+v", fs)
	}
	if last, _, _ := fs[0].GoAwayBody(); last != 0 {
		t.Fatalf("go-away names call %d before any call was taken", last)
	}
	code, _ := fs[1].ErrorBody()
	if code != proto.CodeUnavailable || fs[1].Flags != proto.FlagUnprocessed {
		t.Fatalf("call while draining: code %v flags %v", code, fs[1].Flags)
	}
	if _, action := s.ev.OnOpen(&fakeConn{}); action == 0 {
		t.Fatal("a new connection was accepted while draining")
	}
}

// TestInlineTypedPathAllocs: a typed JSON call (EchoString) allocates at
// most once on the server: the decoded string, which the handler owns.
func TestInlineTypedPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	s, fc := newTestServer(t)
	var batch []byte
	const calls = 16
	for i := 1; i <= calls; i++ {
		batch = proto.AppendFrame(batch, proto.Header{Kind: proto.KindRequest, Codec: proto.CodecJSON, ID: uint32(i)}, builtin.EchoString, nil, []byte(`"0123456789abcdef"`))
	}
	w := &countingConn{fakeConn: fc}
	s.ev.OnOpen(w) // the connection writes through w
	allocs := testing.AllocsPerRun(500, func() {
		fc.in = batch
		s.ev.OnTraffic(w)
	})
	if allocs > calls {
		t.Fatalf("%.2f allocations per wake-up of %d typed calls, want at most %d", allocs, calls, calls)
	}
}

// TestBigFrameInPieces: a frame over bigFrame arriving in pieces is
// gathered apart from gnet's buffer and answered once whole, and what
// follows it in the last piece is answered too.
func TestBigFrameInPieces(t *testing.T) {
	s, fc := newTestServer(t)
	payload := make([]byte, 3*bigFrame+5)
	for i := range payload {
		payload[i] = byte(i * 13)
	}
	stream := proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, builtin.EchoPacket, nil, payload)
	stream = proto.AppendFrame(stream, proto.Header{Kind: proto.KindRequest, ID: 2}, builtin.EchoPacket, nil, []byte("next"))
	stream = proto.AppendFrame(stream, proto.Header{Kind: proto.KindRequest, ID: 3}, builtin.EchoPacket, nil, payload[:bigFrame+1])
	var replies []proto.Frame
	for len(stream) > 0 {
		k := min(len(stream), 50000)
		fc.in = append(fc.in, stream[:k]...)
		stream = stream[k:]
		if action := s.ev.OnTraffic(fc); action != 0 {
			t.Fatalf("action %v", action)
		}
		for _, w := range fc.writes {
			replies = append(replies, decodeAll(t, w)...)
		}
		fc.writes = nil
	}
	if len(replies) != 3 {
		t.Fatalf("%d replies, want 3", len(replies))
	}
	for i, want := range [][]byte{payload, []byte("next"), payload[:bigFrame+1]} {
		if f := replies[i]; f.ID != uint32(i+1) || !bytes.Equal(f.Payload, want) {
			t.Fatalf("reply %d: id %d, %d bytes", i, f.ID, len(f.Payload))
		}
	}
	if len(fc.in) != 0 {
		t.Fatalf("%d bytes left unread", len(fc.in))
	}
}

// TestBigFrameBadSections: a large frame whose sections break the protocol
// is refused once gathered, with a GoAway, like any other.
func TestBigFrameBadSections(t *testing.T) {
	s, fc := newTestServer(t)
	frame := proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, "Bad Route", nil, make([]byte, 2*bigFrame))
	fc.in = append(fc.in, frame[:bigFrame]...)
	if action := s.ev.OnTraffic(fc); action != 0 {
		t.Fatalf("action %v on the first piece", action)
	}
	fc.in = append(fc.in, frame[bigFrame:]...)
	if action := s.ev.OnTraffic(fc); action == 0 {
		t.Fatal("connection left open after a bad large frame")
	}
	fs := decodeAll(t, fc.writes[len(fc.writes)-1])
	if fs[len(fs)-1].Kind != proto.KindGoAway {
		t.Fatalf("last frame %v, want GoAway", fs[len(fs)-1].Kind)
	}
}

// TestOneByteSegmentsAllocs (fault 16): a frame that arrives a byte per
// wake-up allocates nothing on the way, whole-frame included.
func TestOneByteSegmentsAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	s, fc := newTestServer(t)
	frame := proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, builtin.EchoPacket, nil, make([]byte, 32))
	w := &countingConn{fakeConn: fc}
	s.ev.OnOpen(w)                           // the connection writes through w
	backing := make([]byte, 0, 2*len(frame)) // the test's own buffer never grows
	allocs := testing.AllocsPerRun(200, func() {
		fc.in = backing[:0]
		for i := range frame {
			fc.in = append(fc.in, frame[i])
			s.ev.OnTraffic(w)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations for a %d-byte frame fed a byte at a time, want 0", allocs, len(frame))
	}
	if w.n != 201 {
		t.Fatalf("%d replies written, want 201", w.n)
	}
}

// TestGoAwayNamesGreatestID: calls whose ids arrive out of order; the
// GoAway names the greatest, so that no call it answers counts as
// unprocessed at the client.
func TestGoAwayNamesGreatestID(t *testing.T) {
	s, fc := newTestServer(t)
	for _, id := range []uint32{6, 5} {
		fc.in = proto.AppendFrame(fc.in, proto.Header{Kind: proto.KindRequest, ID: id}, builtin.EchoPacket, nil, nil)
	}
	s.ev.OnTraffic(fc)
	s.draining.Store(true)
	fc.writes = nil
	s.ev.OnTraffic(fc)
	fs := decodeAll(t, fc.writes[0])
	if last, _, _ := fs[0].GoAwayBody(); fs[0].Kind != proto.KindGoAway || last != 6 {
		t.Fatalf("GoAway names %d, want 6 (frames %+v)", last, fs)
	}
}
