package client_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// inflight returns the calls a cluster counts in flight on each node.
func inflight(k *client.Cluster) []int64 {
	var out []int64
	for _, n := range k.Nodes() {
		out = append(out, n.Inflight)
	}
	return out
}

func noneInflight(k *client.Cluster) bool {
	for _, n := range inflight(k) {
		if n != 0 {
			return false
		}
	}
	return true
}

// TestClusterGo: futures through a cluster are spread as calls are (round
// robin, exactly; least in flight, counting a future's call on its node
// until it ends), carry their own replies, and leave nothing counted in
// flight once done.
func TestClusterGo(t *testing.T) {
	t.Run("round robin", func(t *testing.T) {
		ms := members(t, 3)
		k := dialService(t, "svc", client.ServiceOptions{Resolver: client.Static(nodesOf(ms...)...)})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		futs := make([]*client.Future, 300)
		for i := range futs {
			var req [8]byte
			binary.LittleEndian.PutUint64(req[:], uint64(i))
			futs[i] = k.GoRaw(ctx, "Count/Hit", req[:]) // req is reused: GoRaw must not keep it
		}
		for i, f := range futs {
			if err := f.Wait(); err != nil {
				t.Fatalf("future %d: %v", i, err)
			}
			if got := f.Reply(); len(got) != 8 || binary.LittleEndian.Uint64(got) != uint64(i) {
				t.Fatalf("future %d: reply %x", i, got)
			}
		}
		for i, m := range ms {
			if got := m.hits.Load(); got != 100 {
				t.Errorf("node %d: %d calls of 300, want 100", i, got)
			}
		}
		var sum int
		if err := k.Go(ctx, "Math/Sum", map[string]int{"a": 2, "b": 3}, &sum).Wait(); err != nil || sum != 5 {
			t.Errorf("Go Math/Sum: %v, sum %d", err, sum)
		}
		if !noneInflight(k) {
			t.Errorf("calls in flight per node after every future ended: %v", inflight(k))
		}
	})

	t.Run("least in flight", func(t *testing.T) {
		ms := members(t, 3)
		nodes := nodesOf(ms...)
		nodes[2].Weight = 2
		k := dialService(t, "svc", client.ServiceOptions{Resolver: client.Static(nodes...), Balance: client.LeastInflight})
		var futs []*client.Future
		for i := range 8 {
			futs = append(futs, k.GoRaw(context.Background(), "Count/Hold", nil))
			waitFor(t, func() bool { return countEntered(ms) == i+1 })
		}
		got := []int{len(ms[0].entered), len(ms[1].entered), len(ms[2].entered)}
		if got[0] != 2 || got[1] != 2 || got[2] != 4 {
			t.Errorf("held futures per node %v, want [2 2 4] for weights 1, 1, 2", got)
		}
		for _, m := range ms {
			close(m.release)
		}
		for i, f := range futs {
			if err := f.Wait(); err != nil {
				t.Errorf("future %d: %v", i, err)
			}
		}
		if !noneInflight(k) {
			t.Errorf("calls in flight per node after every future ended: %v", inflight(k))
		}
	})
}

// TestClusterGoFailover: futures of an idempotent route out on a node
// whose connections are cut are sent again to the other node and succeed;
// those of another route fail with Unavailable, not marked Unprocessed.
func TestClusterGoFailover(t *testing.T) {
	for _, idempotent := range []bool{true, false} {
		ms := members(t, 2)
		px := newCutProxy(t, ms[0].addr)
		opts := client.ServiceOptions{Resolver: client.Static(client.Node{Addr: px.addr}, client.Node{Addr: ms[1].addr})}
		if idempotent {
			opts.Idempotent = client.RouteSet("Count/Hold")
		}
		k := dialService(t, "svc", opts)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var futs []*client.Future
		for range 6 {
			futs = append(futs, k.GoRaw(ctx, "Count/Hold", nil))
		}
		waitFor(t, func() bool { return len(ms[0].entered) == 3 && len(ms[1].entered) == 3 })
		px.kill()
		if idempotent {
			// The three resent land on node 1 and hold there too.
			waitFor(t, func() bool { return len(ms[1].entered) == 6 })
		}
		close(ms[1].release)
		failed := 0
		for i, f := range futs {
			err := f.Wait()
			if err == nil {
				continue
			}
			failed++
			if idempotent || handler.CodeOf(err) != proto.CodeUnavailable || handler.IsUnprocessed(err) {
				t.Errorf("idempotent %v: future %d: %v", idempotent, i, err)
			}
		}
		if want := map[bool]int{true: 0, false: 3}[idempotent]; failed != want {
			t.Errorf("idempotent %v: %d futures failed, want %d", idempotent, failed, want)
		}
		waitFor(t, func() bool { return noneInflight(k) })
		cancel()
		close(ms[0].release)
	}
}

// TestClusterGoWaitForReady: a future through a cluster with no node fails
// at once, unprocessed; under WaitForReady it waits for a node and is
// sent to it.
func TestClusterGoWaitForReady(t *testing.T) {
	m := newMember(t)
	f := newFeed()
	k := dialService(t, "svc", client.ServiceOptions{Resolver: f})
	if err := k.GoRaw(context.Background(), "Count/Hit", nil).Wait(); handler.CodeOf(err) != proto.CodeUnavailable || !handler.IsUnprocessed(err) {
		t.Fatalf("a future with no node: %v, want Unavailable, unprocessed", err)
	}

	f = newFeed()
	k = dialService(t, "svc", client.ServiceOptions{Resolver: f, Options: client.Options{WaitForReady: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fut := k.GoRaw(ctx, "Count/Hit", []byte("x"))
	select {
	case <-fut.Done():
		t.Fatalf("completed with no node: %v", fut.Wait())
	case <-time.After(50 * time.Millisecond):
	}
	f.ch <- nodesOf(m)
	if err := fut.Wait(); err != nil || string(fut.Reply()) != "x" {
		t.Fatalf("after a node joined: %v, reply %q", err, fut.Reply())
	}
	if !noneInflight(k) {
		t.Errorf("calls in flight per node: %v", inflight(k))
	}
}
