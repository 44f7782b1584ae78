package reactor

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
)

// TestWatchdogWatchesLoops: the watchdog looks at a watch per event loop,
// however many connections the loops serve, and at one of its own for a
// connection on a goroutine of its own, until it is forgotten.
func TestWatchdogWatchesLoops(t *testing.T) {
	const loops, conns = 2, 40
	s := New(handler.NewRegistry(), Options{Loops: loops})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	}()
	var ncs []net.Conn
	for range conns {
		nc, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		ncs = append(ncs, nc)
	}
	for deadline := time.Now().Add(5 * time.Second); s.nconns.Load() < conns; {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open, want %d", s.nconns.Load(), conns)
		}
		time.Sleep(5 * time.Millisecond)
	}
	watched := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.watches)
	}
	if n := watched(); n < 1 || n > loops {
		t.Fatalf("%d watches with %d connections on %d loops, want one a loop", n, conns, loops)
	}

	// A connection handed off to a goroutine of its own has a watch of
	// its own, dropped as it is forgotten.
	c := newConn(s, nil, ncs[0].RemoteAddr())
	c.lw = s.ownWatch(c)
	if n := watched(); n < 2 || n > loops+1 {
		t.Fatalf("%d watches with a connection of its own, want one a loop and one", n)
	}
	s.enrol(c)
	s.forget(c)
	if n := watched(); n > loops {
		t.Fatalf("%d watches once the connection of its own is forgotten, want one a loop", n)
	}
}
