package reactor

import (
	"testing"

	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
)

// BenchmarkDirect measures the server's own work per call without sockets,
// as NewLife's "Direct" test does: parse, dispatch inline, encode the reply,
// for wake-ups of 32 requests each. Every goroutine drives a connection of
// its own on one server; -cpu 1 is one core, -cpu 2 all of this machine's.
// ns/op is per call.
//
//	go test -run '^$' -bench Direct -cpu 1,2 ./reactor
func BenchmarkDirect(b *testing.B) {
	benchDirectRoutes(b, 32)
}

// BenchmarkDirectWake is BenchmarkDirect with a wake-up per request, as a
// connection with one call at a time has: the cost of a wake-up shows, and
// with -cpu 2 whatever the loops of two cores both write at every one.
//
//	go test -run '^$' -bench DirectWake -cpu 1,2 ./reactor
func BenchmarkDirectWake(b *testing.B) {
	benchDirectRoutes(b, 1)
}

func benchDirectRoutes(b *testing.B, batch int) {
	for _, bc := range []struct {
		name, route string
		codec       proto.Codec
		payload     []byte
	}{
		{"NoArg", builtin.NoArg, proto.CodecJSON, nil},
		{"EchoPacket16", builtin.EchoPacket, proto.CodecRaw, make([]byte, 16)},
		{"EchoString16", builtin.EchoString, proto.CodecJSON, []byte(`"0123456789abcdef"`)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, _ := newTestServer(b)
			benchDirect(b, s, bc.route, bc.codec, bc.payload, batch)
		})
	}
}

// benchDirect runs calls to route straight through s's wake-up code, in
// wake-ups of batch requests, on every benchmark goroutine.
func benchDirect(b *testing.B, s *Server, route string, codec proto.Codec, payload []byte, batch int) {
	var in []byte
	for i := 1; i <= batch; i++ {
		in = proto.AppendFrame(in, proto.Header{Kind: proto.KindRequest, Codec: codec, ID: uint32(i)}, route, nil, payload)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		fc := &fakeConn{}
		w := &countingConn{fakeConn: fc}
		s.ev.OnOpen(w) // the connection writes through w
		for i := 0; pb.Next(); i++ {
			if i%batch == 0 {
				fc.in = in
				s.ev.OnTraffic(w)
			}
		}
	})
}
