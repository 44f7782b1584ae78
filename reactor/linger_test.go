package reactor_test

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// TestLingerFromOptions: a connection that ends on a GoAway reads and
// discards as much as Options.LingerBytes says, past its default: with
// 64 MiB, a peer that goes on sending 16 MiB (four times the default)
// after a frame past the limit has all of it taken, then reads the GoAway
// and the end; with the default, it would be cut off by a reset.
func TestLingerFromOptions(t *testing.T) {
	if overWS {
		t.Skip("a WebSocket has no write side of its own to shut down: it does not linger")
	}
	s := start(t, builtinRegistry(), reactor.Options{LingerBytes: 64 << 20, LingerTime: time.Minute})
	r := dialRaw(t, s)
	bad := proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, "A/B", nil, nil)[:proto.HeaderSize]
	bad[20], bad[21], bad[22], bad[23] = 0x7F, 0xFF, 0xFF, 0xFF // past any frame limit
	r.nc.SetWriteDeadline(time.Now().Add(20 * time.Second))
	if _, err := r.nc.Write(append(bad, make([]byte, 4*reactor.DefaultLingerBytes)...)); err != nil {
		t.Fatalf("sending 16 MiB after a bad frame to a server that lingers for 64 MiB: %v", err)
	}
	f, err := r.nextWithin(20 * time.Second)
	if err != nil || f.Kind != proto.KindGoAway {
		t.Fatalf("after a bad frame: %v, %v; want a GoAway", f.Kind, err)
	}
	if _, err := r.nextWithin(20 * time.Second); !errors.Is(err, io.EOF) {
		t.Fatalf("after the GoAway: %v, want the end of the stream", err)
	}
}
