package reactor

import (
	"bytes"
	"net"
	"testing"

	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
)

// nopTap takes every connection and discards what it sees.
type nopTap struct{}

func (nopTap) TapOpen(uint64, net.Addr) bool { return true }
func (nopTap) TapFrame(uint64, bool, []byte) {}
func (nopTap) TapClose(uint64)               {}

// copyTap keeps a copy of every frame, in and out, of one connection.
type copyTap struct {
	opened, closed int
	in, out        []byte
}

func (c *copyTap) TapOpen(uint64, net.Addr) bool { c.opened++; return true }
func (c *copyTap) TapFrame(_ uint64, out bool, frame []byte) {
	if out {
		c.out = append(c.out, frame...)
	} else {
		c.in = append(c.in, frame...)
	}
}
func (c *copyTap) TapClose(uint64) { c.closed++ }

// TestTapSeesTheWire: the frames a tap sees are the bytes read and
// written, whole: large frames gathered apart, a large reply written from
// the handler's own slice, Pongs and Errors, each in order.
func TestTapSeesTheWire(t *testing.T) {
	s, fc := newTestServer(t)
	tap := &copyTap{}
	s.SetTap(tap)
	payload := bytes.Repeat([]byte("0123456789abcdef"), 3*bigFrame/16+1)
	var stream []byte
	stream = proto.AppendFrame(stream, proto.Header{Kind: proto.KindRequest, ID: 1}, builtin.EchoPacket, nil, []byte("small"))
	stream = proto.AppendFrame(stream, proto.Header{Kind: proto.KindRequest, ID: 2}, builtin.EchoPacket, nil, payload)
	stream = proto.AppendPing(stream, []byte("p"))
	stream = proto.AppendFrame(stream, proto.Header{Kind: proto.KindRequest, ID: 3}, "No/Such", nil, nil)
	stream = proto.AppendFrame(stream, proto.Header{Kind: proto.KindRequest, ID: 4}, builtin.EchoPacket, nil, payload[:bigFrame+7])
	sent := stream
	var written []byte
	for len(stream) > 0 {
		k := min(len(stream), 40000)
		fc.in = append(fc.in, stream[:k]...)
		stream = stream[k:]
		if action := s.ev.OnTraffic(fc); action != 0 {
			t.Fatalf("action %v", action)
		}
	}
	for _, w := range fc.writes {
		written = append(written, w...)
	}
	if fc.writevs == 0 {
		t.Fatal("no reply was written from the handler's own slice: the test misses that path")
	}
	if tap.opened != 1 || tap.closed != 0 {
		t.Fatalf("opened %d, closed %d; want 1, 0", tap.opened, tap.closed)
	}
	if !bytes.Equal(tap.in, sent) {
		t.Fatalf("the tap saw %d bytes in, want the %d sent", len(tap.in), len(sent))
	}
	if !bytes.Equal(tap.out, written) || len(decodeAll(t, written)) != 5 {
		t.Fatalf("the tap saw %d bytes out, want the %d written", len(tap.out), len(written))
	}
	s.ev.OnClose(fc, nil)
	if tap.closed != 1 {
		t.Fatalf("closed %d times after the connection closed, want 1", tap.closed)
	}
}

// BenchmarkDirectTap is the raw path without a tap and with one that
// discards what it sees: what feeding a tap costs the loop, the
// recorder's own work aside.
//
//	go test -run '^$' -bench DirectTap -count 6 ./reactor
func BenchmarkDirectTap(b *testing.B) {
	for _, bc := range []struct {
		name string
		tap  bool
	}{{"Off", false}, {"Nop", true}} {
		b.Run(bc.name, func(b *testing.B) {
			s, _ := newTestServer(b)
			if bc.tap {
				s.SetTap(nopTap{})
			}
			benchDirect(b, s, builtin.EchoPacket, proto.CodecRaw, make([]byte, 16), 32)
		})
	}
}
