//go:build linux

package client_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler/builtin"
)

// Clients on event loops: their connections keep no goroutine each, their
// asynchronous calls complete, and once the clients close the loops'
// goroutines end and every socket's descriptor is closed.
func TestEventLoopsKeepNoGoroutinePerConnection(t *testing.T) {
	const clients, rounds = 200, 5
	s := server(t, "127.0.0.1:0")
	// The loops' epoll instances are the process's from the first client
	// that asks for them on.
	warm, err := client.Dial(context.Background(), s.Addr().String(), client.Options{EventLoops: true})
	if err != nil {
		t.Fatal(err)
	}
	warm.Close()
	before, fds := settled(t)
	cs := make([]*client.Client, clients)
	for i := range cs {
		c, err := client.Dial(context.Background(), s.Addr().String(), client.Options{EventLoops: true, KeepAlive: -1})
		if err != nil {
			t.Fatal(err)
		}
		cs[i] = c
	}
	// A connection keeps the goroutine that redials it (parked until it is
	// lost) but no reader: the loops are one per P, and a writer comes and
	// goes only when a socket is full.
	if n := runtime.NumGoroutine() - before; n > clients+2*runtime.GOMAXPROCS(0)+10 {
		t.Errorf("%d goroutines more with %d clients on event loops, want one a client (its redial) and a few per P", n, clients)
	}
	for r := range rounds {
		echoesAsync(t, clients, func(i int) (*client.Client, context.Context, []byte) {
			return cs[i], context.Background(), fmt.Appendf(nil, "call %d of client %d", r, i)
		})
	}
	for _, c := range cs {
		c.Close()
	}
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > before; {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines 10 s after every client closed, %d before: the loops did not end", runtime.NumGoroutine(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The server's side of each connection closes as it reads the client's
	// close: wait for that too.
	for deadline := time.Now().Add(10 * time.Second); openFds(t) > fds; {
		if time.Now().After(deadline) {
			t.Fatalf("%d descriptors open 10 s after every client closed, %d before", openFds(t), fds)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// settled returns the process's goroutines and open descriptors once they
// have stayed the same for 100 ms (the warm-up client's loop and sockets
// gone), or after 5 s.
func settled(t *testing.T) (int, int) {
	g, fds, same := runtime.NumGoroutine(), openFds(t), 0
	for deadline := time.Now().Add(5 * time.Second); same < 10 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		g2, fds2 := runtime.NumGoroutine(), openFds(t)
		if g2 == g && fds2 == fds {
			same++
		} else {
			g, fds, same = g2, fds2, 0
		}
	}
	return g, fds
}

// openFds returns how many descriptors the process has open.
func openFds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// A reply larger than the read buffer is read off the loop (it waits for
// its bytes), while the loop goes on delivering small replies on the same
// and other connections; a sequential Call waits for the loop's delivery.
func TestEventLoopsLargeReplies(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	opts := client.Options{EventLoops: true, Limits: client.DefaultOptions().Limits}
	opts.Limits.MaxFrameSize = 8 << 20
	big := dial(t, s.Addr().String(), opts)
	small := dial(t, s.Addr().String(), client.Options{EventLoops: true})
	payload := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				reply, err := big.CallRaw(context.Background(), builtin.EchoPacket, payload, nil)
				if err == nil && !bytes.Equal(reply, payload) {
					err = fmt.Errorf("a %d-byte reply to a %d-byte call, not its echo", len(reply), len(payload))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for _, c := range []*client.Client{big, small} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				req := fmt.Appendf(nil, "small %d", i)
				reply, err := c.CallRaw(context.Background(), builtin.EchoPacket, req, nil)
				if err == nil && !bytes.Equal(reply, req) {
					err = fmt.Errorf("reply %q to %q", reply, req)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
