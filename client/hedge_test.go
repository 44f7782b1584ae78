package client_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// hedgeNode serves Maybe/Slow and Once/Slow (the same handler, idempotent
// or not as the client says) and Maybe/Fail. A slow node's handlers wait
// for their context to end, counting the runs and the cancels they see; a
// fast node answers "fast" at once, and Maybe/Fail with Internal.
type hedgeNode struct {
	addr          string
	runs, cancels atomic.Int64
}

func newHedgeNode(t *testing.T, slow bool) *hedgeNode {
	t.Helper()
	n := &hedgeNode{}
	wait := func(ctx context.Context) error {
		n.runs.Add(1)
		select {
		case <-ctx.Done():
			n.cancels.Add(1)
			return ctx.Err()
		case <-time.After(10 * time.Second): // a bound, for a broken test
			return nil
		}
	}
	reg := handler.NewRegistry()
	for _, route := range []string{"Maybe/Slow", "Once/Slow"} {
		reg.HandleFunc(route, func(ctx context.Context, _, reply []byte) ([]byte, error) {
			if slow {
				return reply, wait(ctx)
			}
			return append(reply, "fast"...), nil
		}, handler.Blocking())
	}
	reg.HandleFunc("Maybe/Fail", func(ctx context.Context, _, reply []byte) ([]byte, error) {
		if slow {
			return reply, wait(ctx)
		}
		return reply, handler.Errorf(proto.CodeInternal, "failed")
	}, handler.Blocking())
	s := reactor.New(reg, reactor.Options{})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, s) })
	n.addr = s.Addr().String()
	return n
}

// TestClusterHedge: with a slow node and a fast one, every call to an
// idempotent route that goes to the slow node first is sent again to the
// fast one after Hedge.Delay and answered by it, and the slow copy is
// cancelled on its server; a route that is not idempotent is never hedged;
// an error that is not to be retried, from either copy, is the call's at
// once.
func TestClusterHedge(t *testing.T) {
	slow, fast := newHedgeNode(t, true), newHedgeNode(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	k, err := client.DialService(ctx, "static://"+slow.addr+","+fast.addr+"/svc", client.ServiceOptions{
		Options: client.Options{MaxRetries: -1, Idempotent: client.RouteSet("Maybe/Slow", "Maybe/Fail")},
		Hedge:   client.Hedge{Delay: 100 * time.Millisecond}, // well past a fast call on a loaded machine
	})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()

	const calls = 20
	for i := range calls {
		got, err := k.CallRaw(ctx, "Maybe/Slow", nil, nil)
		if err != nil || string(got) != "fast" {
			t.Fatalf("call %d: %q, %v; want the fast node's answer", i, got, err)
		}
	}
	// A copy takes no turn of round robin: calls alternate between the
	// nodes, and the half that start on the slow one are hedged.
	hedged := k.Hedges()
	if hedged != calls/2 || int64(hedged) != slow.runs.Load() {
		t.Fatalf("%d of %d calls hedged, %d runs on the slow node; want every call that went there first, and those alone", hedged, calls, slow.runs.Load())
	}
	waitFor(t, func() bool { return slow.cancels.Load() == slow.runs.Load() })

	// Not idempotent: a call that goes to the slow node waits there.
	var late int
	for range 4 {
		cctx, ccancel := context.WithTimeout(ctx, 300*time.Millisecond)
		got, err := k.CallRaw(cctx, "Once/Slow", nil, nil)
		ccancel()
		switch {
		case err == nil && string(got) == "fast":
		case handler.CodeOf(err) == proto.CodeDeadlineExceeded:
			late++
		default:
			t.Fatalf("Once/Slow: %q, %v", got, err)
		}
	}
	if late != 2 || k.Hedges() != hedged {
		t.Errorf("Once/Slow, round robin over the two nodes: %d of 4 ran out of time, %d copies sent; want 2 and none", late, k.Hedges()-hedged)
	}

	// An error the retry rules would not send again ends the call at once,
	// whichever copy it comes from; the slow copy is cancelled.
	for range 4 {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := k.CallRaw(cctx, "Maybe/Fail", nil, nil)
		ccancel()
		if handler.CodeOf(err) != proto.CodeInternal {
			t.Fatalf("Maybe/Fail: %v; want the fast node's Internal", err)
		}
	}
	waitFor(t, func() bool { return slow.cancels.Load() == slow.runs.Load() })
}

// TestClusterHedgeFutures: Go and GoRaw are hedged as Call is: the
// futures that start on the slow node get the fast node's answer through a
// copy, the slow copies are cancelled, and a route that is not idempotent
// is not hedged. The request given to GoRaw is the caller's again at once.
func TestClusterHedgeFutures(t *testing.T) {
	slow, fast := newHedgeNode(t, true), newHedgeNode(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	k, err := client.DialService(ctx, "static://"+slow.addr+","+fast.addr+"/svc", client.ServiceOptions{
		Options: client.Options{MaxRetries: -1, Idempotent: client.RouteSet("Maybe/Slow")},
		Hedge:   client.Hedge{Delay: 100 * time.Millisecond}, // well past a fast call on a loaded machine
	})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()

	const calls = 20
	futures := make([]*client.Future, calls)
	req := []byte("the caller's")
	for i := range futures {
		if i%2 == 0 {
			futures[i] = k.GoRaw(ctx, "Maybe/Slow", req)
			copy(req, "overwritten!") // GoRaw's copy is its own
		} else {
			futures[i] = k.Go(ctx, "Maybe/Slow", nil, nil) // the reply is raw: dropped, not decoded
		}
	}
	for i, f := range futures {
		if err := f.Wait(); err != nil {
			t.Fatalf("future %d: %v", i, err)
		}
		if i%2 == 0 && string(f.Reply()) != "fast" {
			t.Fatalf("future %d: %q, want the fast node's answer", i, f.Reply())
		}
	}
	if h := k.Hedges(); h != calls/2 || int64(h) != slow.runs.Load() {
		t.Fatalf("%d of %d futures hedged, %d runs on the slow node; want the half that went there first", h, calls, slow.runs.Load())
	}
	waitFor(t, func() bool { return slow.cancels.Load() == slow.runs.Load() })

	cctx, ccancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer ccancel()
	a, b := k.GoRaw(cctx, "Once/Slow", nil), k.GoRaw(cctx, "Once/Slow", nil)
	errA, errB := a.Wait(), b.Wait()
	if late := handler.CodeOf(errA) == proto.CodeDeadlineExceeded || handler.CodeOf(errB) == proto.CodeDeadlineExceeded; !late || k.Hedges() != calls/2 {
		t.Fatalf("Once/Slow futures: %v and %v, %d copies; want one to run out of time on the slow node, and no copy", errA, errB, k.Hedges()-calls/2)
	}
}

// TestClusterHedgeOneNode: with one node there is no second to send a
// copy to; the call waits for the one it has.
func TestClusterHedgeOneNode(t *testing.T) {
	fast := newHedgeNode(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k, err := client.DialService(ctx, "static://"+fast.addr+"/svc", client.ServiceOptions{
		Options: client.Options{Idempotent: client.RouteSet("Maybe/Slow")},
		Hedge:   client.Hedge{Delay: time.Nanosecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	for range 10 {
		if got, err := k.CallRaw(ctx, "Maybe/Slow", nil, nil); err != nil || string(got) != "fast" {
			t.Fatalf("%q, %v", got, err)
		}
	}
	if k.Hedges() != 0 {
		t.Errorf("%d copies sent with one node", k.Hedges())
	}
}
