package load

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/internal/loadgen"
	"github.com/rpcd/rpcd/proto"
)

// TestWirePolledRedial: in an open loop the pacers read the connections
// from their epoll instances; when the server sends one a GoAway and kills
// another mid-run, both are redialled and called again, and every call is
// accounted for: each reply the server wrote was counted answered, and the
// rest failed as unavailable.
func TestWirePolledRedial(t *testing.T) {
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
		case 2: // answer some, take a call and die with it unanswered
			echo(20)
			_, _ = fc.next()
		default:
			echo(-1)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	sc := RawRoute("Test/Echo", Pattern(16), true)
	d, err := dialWire(ctx, driverConfig{addr: s.ln.Addr().String(), sc: sc, conns: conns, inflight: 1, rate: conns * 200,
		timeout: 5 * time.Second, opts: client.Options{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	if d.polls == nil {
		t.Fatal("no epoll instances: the open loop's pacers do not read")
	}
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
	if r.Errors != r.ErrorsBy["unavailable"] || r.Errors < 1 {
		t.Errorf("errors %v; want only unavailable, the killed connection's call among them", r.ErrorsBy)
	}
	if n := d.flying.Load(); n != 0 {
		t.Errorf("%d calls in flight after stop, want none", n)
	}
}

// TestReadLoopSeesEndWithLastBytes: a server's close that comes in with
// its last bytes, both before the reader first looks, ends the wire
// driver's raw read loop with io.EOF once the bytes are read. The
// runtime's poller is edge-triggered: a loop that waited after a short
// read would wait for an edge that never comes (here, until the deadline).
func TestReadLoopSeesEndWithLastBytes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sent := make(chan error, 1)
	go func() {
		nc, err := ln.Accept()
		if err == nil {
			_, err = nc.Write(make([]byte, 100))
			nc.Close()
		}
		sent <- err
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the close comes in behind the bytes
	rio := newRawIO(nc)
	if rio == nil {
		t.Fatal("no raw I/O for a TCP connection")
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	got := 0
	err = rio.readLoop(func() []byte { return buf }, func(n int) error { got += n; return nil })
	if err != io.EOF || got != 100 {
		t.Fatalf("read loop ended with %v after %d bytes; want EOF after 100", err, got)
	}
}
