package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
)

// holdingServer answers no Request until release is closed, then echoes
// every one; it counts the Cancel frames it reads.
func holdingServer(t *testing.T, release <-chan struct{}, cancels *atomic.Int64) string {
	return fakeServer(t, func(nc net.Conn) {
		r := &frameReader{nc: nc}
		for {
			f, err := r.next()
			if err != nil {
				return
			}
			switch f.Kind {
			case proto.KindCancel:
				cancels.Add(1)
			case proto.KindRequest:
				select {
				case <-release:
					if _, err := nc.Write(response(f, f.Payload)); err != nil {
						return
					}
				default:
				}
			}
		}
	})
}

// callAll starts n calls under ctx and returns their errors' channel.
func callAll(c *client.Client, ctx context.Context, n int) <-chan error {
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := c.CallRaw(ctx, "Any/Route", []byte("x"), nil)
			errs <- err
		}()
	}
	return errs
}

// TestSharedContextEnds: callers sharing a cancellable context wait for
// their replies under one watch of it, which ends them all when the context
// is cancelled (else they would wait for replies that never come), tells
// the server of each, and frees its slot; the connection still serves.
func TestSharedContextEnds(t *testing.T) {
	release := make(chan struct{})
	var cancels atomic.Int64
	c := dial(t, holdingServer(t, release, &cancels), client.Options{MaxRetries: -1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const callers = 8
	errs := callAll(c, ctx, callers)
	waitFor(t, func() bool { return client.WatchedContexts(c) == 1 })
	waitFor(t, func() bool { return client.Pending(c) == callers })
	cancel()
	for range callers {
		select {
		case err := <-errs:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("a call whose context was cancelled: %v, want Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("calls under a cancelled context still waiting after 5 s")
		}
	}
	// The first call under the context is not watched (a context seen
	// once may be a call's own); the rest are, the leader's too, unless
	// its read deadline ends it before the watch does.
	if n := client.ContextEnded(c); n < callers-2 {
		t.Fatalf("the watch ended %d calls, want at least %d", n, callers-2)
	}
	waitFor(t, func() bool { return cancels.Load() == callers })
	if n := client.WatchedContexts(c); n != 0 {
		t.Fatalf("%d contexts still watched after theirs ended", n)
	}
	if n := client.Pending(c); n != 0 {
		t.Fatalf("%d calls left pending", n)
	}
	close(release)
	if reply, err := c.CallRaw(context.Background(), "Any/Route", []byte("after"), nil); err != nil || string(reply) != "after" {
		t.Fatalf("a call after the cancel: %q, %v", reply, err)
	}
}

// TestSharedContextSlots: a context under which only one call waits is never
// watched (a context per call would pay for a watch each); a client
// watches at most four contexts at a time, and a slot is free again once
// its context ends; calls under contexts it does not watch still end with
// their contexts.
func TestSharedContextSlots(t *testing.T) {
	release := make(chan struct{})
	var cancels atomic.Int64
	c := dial(t, holdingServer(t, release, &cancels), client.Options{MaxRetries: -1})
	var wg sync.WaitGroup
	defer wg.Wait()
	base, stop := context.WithCancel(context.Background()) // ends every call, should the test fail
	defer stop()
	start := func(ctx context.Context, n int) {
		errs := callAll(c, ctx, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				if err := <-errs; !errors.Is(err, context.Canceled) && err != nil {
					t.Errorf("call: %v", err)
				}
			}
		}()
	}

	// One call per context, one after another, so that no context sees
	// two waits in a row.
	var cancelOnes []context.CancelFunc
	for i := range 6 {
		ctx, cancel := context.WithCancel(base)
		cancelOnes = append(cancelOnes, cancel)
		start(ctx, 1)
		waitFor(t, func() bool { return client.Pending(c) == i+1 })
	}
	if n := client.WatchedContexts(c); n != 0 {
		t.Fatalf("%d contexts watched, each with one call: want none", n)
	}
	for _, cancel := range cancelOnes {
		cancel()
	}
	waitFor(t, func() bool { return client.Pending(c) == 0 })

	// Six contexts with three callers each: four get watched.
	var cancelShared []context.CancelFunc
	for i := range 6 {
		ctx, cancel := context.WithCancel(base)
		cancelShared = append(cancelShared, cancel)
		start(ctx, 3)
		// All three in before the next context's: calls of two contexts
		// taking turns would have neither watched. (Pending%3 == 0, which
		// this waited for before, holds before any of the three is in.)
		waitFor(t, func() bool { return client.Pending(c) == 3*(i+1) })
	}
	waitFor(t, func() bool { return client.WatchedContexts(c) == 4 })
	time.Sleep(10 * time.Millisecond)
	if n := client.WatchedContexts(c); n != 4 {
		t.Fatalf("%d contexts watched, want at most 4", n)
	}
	for _, cancel := range cancelShared {
		cancel()
	}
	waitFor(t, func() bool { return client.Pending(c) == 0 })
	waitFor(t, func() bool { return client.WatchedContexts(c) == 0 })

	// Freed, the slots take new contexts.
	ctx, cancel := context.WithCancel(base)
	start(ctx, 3)
	waitFor(t, func() bool { return client.WatchedContexts(c) == 1 })
	cancel()
	waitFor(t, func() bool { return client.Pending(c) == 0 })
}

// ownCtx is a context that context.AfterFunc cannot hook into: it watches
// it with a goroutine of its own.
type ownCtx struct {
	context.Context
	done chan struct{}
}

func (o *ownCtx) Done() <-chan struct{} { return o.done }

// TestSharedContextAtClose: a watched context that never ends is let go when
// the client closes (the package's leak check fails otherwise: watching
// such a context takes a goroutine).
func TestSharedContextAtClose(t *testing.T) {
	release := make(chan struct{})
	var cancels atomic.Int64
	c := dial(t, holdingServer(t, release, &cancels), client.Options{MaxRetries: -1})
	ctx := &ownCtx{Context: context.Background(), done: make(chan struct{})}
	errs := callAll(c, ctx, 4)
	waitFor(t, func() bool { return client.WatchedContexts(c) == 1 })
	waitFor(t, func() bool { return client.Pending(c) == 4 })
	close(release)
	c.Close() // fails the calls, and lets the watch go
	for range 4 {
		if err := <-errs; err == nil {
			t.Fatal("a call pending when the client closed did not fail")
		}
	}
	if n := client.WatchedContexts(c); n != 0 {
		t.Fatalf("%d contexts still watched after Close", n)
	}
}

// TestSharedContextCancelRaces: callers on one connection call in a loop
// under a shared context, which is cancelled at a random moment while
// replies are arriving, round after round. Every call returns, with its
// echo or Canceled (never another error, never a wrong reply), and no call
// is left in the pending table: whoever takes a call out of it, the reader
// with the reply or the watch with the cancel, completes it alone.
func TestSharedContextCancelRaces(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	c := dial(t, s.Addr().String(), client.Options{MaxRetries: -1})
	const callers, rounds = 16, 40
	ended := uint64(0)
	for round := range rounds {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		errs := make(chan error, callers)
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req := []byte{byte(round), byte(i), 0, 0}
				reply := make([]byte, 0, 8)
				for n := 0; ; n++ {
					req[2], req[3] = byte(n), byte(n>>8)
					got, err := c.CallRaw(ctx, builtin.EchoPacket, req, reply[:0])
					if errors.Is(err, context.Canceled) {
						return
					}
					if err != nil || string(got) != string(req) {
						errs <- fmt.Errorf("call %d of caller %d: %q, %v", n, i, got, err)
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(round%5) * 500 * time.Microsecond)
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: callers still waiting 10 s after the cancel", round)
		}
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
		waitFor(t, func() bool { return client.Pending(c) == 0 })
		ended = client.ContextEnded(c)
	}
	if ended == 0 {
		t.Fatal("no call was ended by a context's watch: the test does not reach it")
	}
	t.Logf("%d calls ended by the watch over %d rounds", ended, rounds)
}
