package load

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/internal/loadgen"
	"github.com/rpcd/rpcd/proto"
)

// TestRedial: in an open loop on several connections, which the clients'
// event loops read, when the server sends one a GoAway and kills another
// mid-run, both are redialled and called again, and every call is
// accounted for: each reply the server wrote was counted answered, and the
// rest failed as unavailable. The same with calls pipelined, two in
// flight a connection at most, as rpcd soak makes them: the killed
// connection dies with two calls in flight, both counted unavailable.
func TestRedial(t *testing.T) {
	for _, depth := range []int{1, 2} {
		t.Run(fmt.Sprintf("depth %d", depth), func(t *testing.T) { testRedial(t, depth) })
	}
}

func testRedial(t *testing.T, depth int) {
	var replies, after atomic.Int64 // written by the server; on redialled connections
	const conns = 4
	s := newFakeServer(t, func(s *fakeServer, n int, fc *fakeConn) {
		replied := func() {
			if replies.Add(1); n > conns {
				after.Add(1)
			}
		}
		echo := func(count int) uint32 { return fc.echo(count, s, replied) }
		switch n {
		case 1: // answer some, go away, answer what is still asked
			last := echo(20)
			_, _ = fc.nc.Write(proto.AppendGoAway(nil, last, proto.CodeOK, "draining"))
			echo(-1)
		case 2: // answer some, take depth calls (in flight together) and die with them unanswered
			echo(20)
			for range depth {
				_, _ = fc.next()
			}
		default:
			echo(-1)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	sc := RawRoute("Test/Echo", Pattern(16), true)
	d, err := dialAsync(ctx, driverConfig{addr: s.ln.Addr().String(), sc: sc, conns: conns, inflight: 1, rate: conns * 200,
		timeout: 5 * time.Second, opts: client.Options{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}, depth: depth})
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	rec := loadgen.NewRecorder(conns)
	d.start(rec, 0)
	deadline := time.Now().Add(runTimeout / 2)
	for after.Load() < 100 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	d.stop()

	r := rec.Result(time.Second, 0)
	if n := s.accepts.Load(); n != conns+2 {
		t.Errorf("%d connections, want %d: a successor after the GoAway, a redial after the kill", n, conns+2)
	}
	if after.Load() < 100 {
		t.Errorf("%d calls answered on the redialled connections, want 100", after.Load())
	}
	if got, want := r.Calls-r.Errors, replies.Load(); got != want {
		t.Errorf("%d calls answered, the server wrote %d replies", got, want)
	}
	if r.Errors != r.ErrorsBy["unavailable"] || r.Errors < int64(depth) {
		t.Errorf("errors %v; want only unavailable, the killed connection's %d calls among them", r.ErrorsBy, depth)
	}
	if n := d.flying.Load(); n != 0 {
		t.Errorf("%d calls in flight after stop, want none", n)
	}
}
