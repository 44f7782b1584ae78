package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/proto"
)

// TestTimeoutOptionWithoutContext: under Options.Timeout, calls whose
// context never ends get their deadline without a context of the time
// package: a caller reading its own reply, and callers waiting behind it,
// all end with DeadlineExceeded near the deadline, and the sweep that woke
// the waiting ones lets them go. A context's values still reach the call.
func TestTimeoutOptionWithoutContext(t *testing.T) {
	// A server that reads and never answers, so only the client's own
	// deadline ends the calls (rpcd's server would answer DeadlineExceeded
	// at the deadline the frames carry), until the test's last call.
	silent := make(chan struct{})
	addr := fakeServer(t, func(nc net.Conn) {
		r := &frameReader{nc: nc}
		for {
			f, err := r.next()
			if err != nil {
				return
			}
			select {
			case <-silent:
			default:
				continue
			}
			if f.Kind == proto.KindRequest {
				v, _ := f.Metadata.Get("k") // echoed: the caller's context reached the frame
				if _, err := nc.Write(response(f, append(f.Payload, v...))); err != nil {
					return
				}
			}
		}
	})
	const timeout = 100 * time.Millisecond
	c := dial(t, addr, client.Options{Timeout: timeout, MaxRetries: -1})
	ctx := client.WithMetadata(context.Background(), "k", "v") // never ends, has values
	const callers = 4                                          // one reads, the others wait behind it
	errs := make(chan error, callers)
	took := make(chan time.Duration, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			_, err := c.CallRaw(ctx, "Any/Route", nil, nil)
			took <- time.Since(start)
			errs <- err
		}()
	}
	ended := make(chan struct{})
	go func() { wg.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("calls under Options.Timeout still waiting after 10 s")
	}
	for range callers {
		if err := <-errs; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("call under Options.Timeout: %v, want DeadlineExceeded", err)
		}
		if d := <-took; d < timeout || d > 5*time.Second {
			t.Fatalf("a call under a %v timeout ended after %v", timeout, d)
		}
	}
	if n := client.Swept(c); n != 0 {
		t.Fatalf("%d calls still watched by the sweep", n)
	}
	if n := client.Pending(c); n != 0 {
		t.Fatalf("%d calls left pending", n)
	}
	close(silent)
	reply, err := c.CallRaw(ctx, "Any/Route", []byte("after"), nil) // the connection still serves
	if err != nil || string(reply) != "afterv" {
		t.Fatalf("a call after the timeouts: %q, %v", reply, err)
	}
}

// TestClusterTimeoutOption: a Cluster's call under Options.Timeout with a
// context that never ends, and so with the deadline of the cluster's sweep
// (TestClusterCallAllocs counts that path's one allocation), ends with
// DeadlineExceeded when it is never answered, near its deadline.
func TestClusterTimeoutOption(t *testing.T) {
	silent := fakeServer(t, func(nc net.Conn) { _, _ = io.Copy(io.Discard, nc) }) // reads, never answers
	opts := client.Options{Timeout: 100 * time.Millisecond}
	k := dialService(t, "svc", client.ServiceOptions{Options: opts, Resolver: client.Static(client.Node{Addr: silent})})
	start := time.Now()
	if _, err := k.CallRaw(context.Background(), "Any/Route", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("an unanswered call under Options.Timeout: %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond || d > 5*time.Second {
		t.Fatalf("a call under a 100ms timeout ended after %v", d)
	}
}
