package reactor

import (
	"testing"

	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
)

// BenchmarkOnTraffic measures the server's own work per call, without
// sockets: parse, dispatch inline, encode, for a wake-up of 32 requests.
// Run it on one core with -cpu 1.
func BenchmarkOnTraffic(b *testing.B) {
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
			s, fc := newTestServer(b)
			const batch = 32
			var in []byte
			for i := 1; i <= batch; i++ {
				in = proto.AppendFrame(in, proto.Header{Kind: proto.KindRequest, Codec: bc.codec, ID: uint32(i)}, bc.route, nil, bc.payload)
			}
			w := &countingConn{fakeConn: fc}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				fc.in = in
				s.OnTraffic(w)
			}
		})
	}
}
