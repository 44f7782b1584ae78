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

// flaky is a node whose route T/Hit counts its calls and, while fail is
// not OK, fails them with that code.
type flaky struct {
	addr string
	hits atomic.Int64
	fail atomic.Uint32 // a proto.Code; OK answers
}

func newFlaky(t *testing.T, fail proto.Code) *flaky {
	t.Helper()
	f := &flaky{}
	f.fail.Store(uint32(fail))
	reg := handler.NewRegistry()
	reg.HandleFunc("T/Hit", func(_ context.Context, req, reply []byte) ([]byte, error) {
		f.hits.Add(1)
		if code := proto.Code(f.fail.Load()); code != proto.CodeOK {
			return reply, &handler.Error{Code: code, Message: "failing on purpose"}
		}
		return append(reply, req...), nil
	})
	s := reactor.New(reg, reactor.Options{Loops: 1})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, s) })
	f.addr = s.Addr().String()
	return f
}

func hitN(k *client.Cluster, n int) (failed int) {
	for range n {
		if _, err := k.CallRaw(context.Background(), "T/Hit", []byte("x"), nil); err != nil {
			failed++
		}
	}
	return failed
}

func ejected(k *client.Cluster) map[string]bool {
	out := map[string]bool{}
	for _, n := range k.Nodes() {
		out[n.Addr] = n.Ejected
	}
	return out
}

// TestClusterEjection: a node whose calls fail as a node fails them
// (Internal) is ejected after Failures in a row and gets no call while
// another node can take them; one whose calls fail for their own sake
// (InvalidArgument) is not; with every node failing, calls still go out;
// a negative Failures never ejects.
func TestClusterEjection(t *testing.T) {
	for _, tc := range []struct {
		name     string
		codes    [2]proto.Code
		failures int
		want     [2]int64 // hits of 100 calls, round robin
	}{
		{"node failure", [2]proto.Code{proto.CodeOK, proto.CodeInternal}, 3, [2]int64{97, 3}},
		{"unavailable", [2]proto.Code{proto.CodeOK, proto.CodeUnavailable}, 3, [2]int64{97, 3}},
		{"the call's failure", [2]proto.Code{proto.CodeOK, proto.CodeInvalidArgument}, 3, [2]int64{50, 50}},
		{"every node failing", [2]proto.Code{proto.CodeInternal, proto.CodeInternal}, 3, [2]int64{50, 50}},
		{"off", [2]proto.Code{proto.CodeOK, proto.CodeInternal}, -1, [2]int64{50, 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := [2]*flaky{newFlaky(t, tc.codes[0]), newFlaky(t, tc.codes[1])}
			k := dialService(t, "svc", client.ServiceOptions{
				Options:  client.Options{MaxRetries: -1},
				Resolver: client.Static(client.Node{Addr: nodes[0].addr}, client.Node{Addr: nodes[1].addr}),
				Ejection: client.Ejection{Failures: tc.failures, Duration: time.Hour},
			})
			hitN(k, 100)
			for i, n := range nodes {
				if got := n.hits.Load(); got != tc.want[i] {
					t.Errorf("node %d (%v): %d calls of 100, want %d", i, tc.codes[i], got, tc.want[i])
				}
			}
			wantOut := tc.failures > 0 && tc.codes[1] != proto.CodeInvalidArgument
			if got := ejected(k)[nodes[1].addr]; got != wantOut {
				t.Errorf("node 1 ejected: %v, want %v", got, wantOut)
			}
		})
	}
}

// TestClusterEjectionTrial: once its ejection has run out, a failing node
// gets one call, and its failure ejects it again at once, for twice as
// long; once it answers again, a call that succeeds closes its breaker and
// it gets its share of calls.
func TestClusterEjectionTrial(t *testing.T) {
	const d = 300 * time.Millisecond
	good, bad := newFlaky(t, proto.CodeOK), newFlaky(t, proto.CodeInternal)
	k := dialService(t, "svc", client.ServiceOptions{
		Options:  client.Options{MaxRetries: -1},
		Resolver: client.Static(client.Node{Addr: good.addr}, client.Node{Addr: bad.addr}),
		Ejection: client.Ejection{Failures: 2, Duration: d},
	})
	ejectedAt := time.Now()
	if hitN(k, 20); bad.hits.Load() != 2 {
		t.Fatalf("the failing node took %d calls before its ejection, want 2", bad.hits.Load())
	}
	time.Sleep(d - time.Since(ejectedAt) + 50*time.Millisecond) // the ejection has run out
	retrialAt := time.Now()
	hitN(k, 20)
	if got := bad.hits.Load(); got != 3 {
		t.Fatalf("on trial, the failing node took %d calls in all, want 3 (one more)", got)
	}
	time.Sleep(d + 50*time.Millisecond - time.Since(retrialAt)) // past d, within 2d
	hitN(k, 20)
	if got := bad.hits.Load(); got != 3 && time.Since(retrialAt) < 2*d {
		t.Fatalf("within twice the duration, the node took %d calls in all, want 3", got)
	}

	bad.fail.Store(uint32(proto.CodeOK)) // it answers again
	waitFor(t, func() bool { hitN(k, 2); return !ejected(k)[bad.addr] && bad.hits.Load() > 3 })
	before := bad.hits.Load()
	if failed := hitN(k, 100); failed != 0 {
		t.Fatalf("%d calls failed after the node came back", failed)
	}
	if got := bad.hits.Load() - before; got != 50 {
		t.Errorf("the node back: %d calls of 100, want 50", got)
	}
}

// TestClusterEjectionFutures: futures count in a node's breaker as calls
// do.
func TestClusterEjectionFutures(t *testing.T) {
	good, bad := newFlaky(t, proto.CodeOK), newFlaky(t, proto.CodeInternal)
	k := dialService(t, "svc", client.ServiceOptions{
		Options:  client.Options{MaxRetries: -1},
		Resolver: client.Static(client.Node{Addr: good.addr}, client.Node{Addr: bad.addr}),
		Ejection: client.Ejection{Failures: 3, Duration: time.Hour},
	})
	for range 40 {
		_ = k.GoRaw(context.Background(), "T/Hit", []byte("x")).Wait()
	}
	if got := bad.hits.Load(); got != 3 {
		t.Errorf("the failing node took %d futures of 40, want 3", got)
	}
}

// TestClusterEjectionInFlight: calls that were out on a node when it was
// ejected and fail afterwards neither eject it again nor lengthen its
// ejection: it is back on trial after Duration, not twice that.
func TestClusterEjectionInFlight(t *testing.T) {
	const d = 400 * time.Millisecond
	good := newFlaky(t, proto.CodeOK)
	bad := &flaky{}
	release := make(chan struct{})
	reg := handler.NewRegistry()
	reg.HandleFunc("T/Hit", func(_ context.Context, req, reply []byte) ([]byte, error) {
		bad.hits.Add(1)
		<-release
		return reply, &handler.Error{Code: proto.CodeInternal, Message: "failing on purpose"}
	}, handler.Blocking())
	s := reactor.New(reg, reactor.Options{Loops: 1})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, s) })
	t.Cleanup(func() { // before stop, should the test end early
		select {
		case <-release:
		default:
			close(release)
		}
	})
	bad.addr = s.Addr().String()
	k := dialService(t, "svc", client.ServiceOptions{
		Options:  client.Options{MaxRetries: -1},
		Resolver: client.Static(client.Node{Addr: good.addr}, client.Node{Addr: bad.addr}),
		Ejection: client.Ejection{Failures: 2, Duration: d},
	})
	var futs []*client.Future
	for range 12 { // 6 on each node
		futs = append(futs, k.GoRaw(context.Background(), "T/Hit", []byte("x")))
	}
	waitFor(t, func() bool { return bad.hits.Load() == 6 })
	close(release)
	for _, f := range futs {
		_ = f.Wait()
	}
	ejectedAt := time.Now() // about: the second failure of six
	if !ejected(k)[bad.addr] {
		t.Fatal("the node was not ejected")
	}
	time.Sleep(d + 100*time.Millisecond - time.Since(ejectedAt))
	hitN(k, 10)
	if got := bad.hits.Load(); got != 7 {
		t.Errorf("after Duration, the node took %d calls in all, want 7 (one on trial): its ejection grew", got)
	}
}
