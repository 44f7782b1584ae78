package client_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// member is one node of a test service: a server on loopback whose routes
// count what they run. Count/Hit counts calls; Count/Key records the key
// (the payload) of each call; Count/Once records each call's 8-byte id and
// fails the test if one runs twice; Count/Hold waits for release.
type member struct {
	srv     *reactor.Server
	addr    string
	hits    atomic.Int64
	entered chan struct{}
	release chan struct{}

	mu   sync.Mutex
	keys map[string]int
	ids  map[uint64]int
}

func newMember(t testing.TB) *member {
	t.Helper()
	m := &member{entered: make(chan struct{}, 1000), release: make(chan struct{}), keys: map[string]int{}, ids: map[uint64]int{}}
	reg := handler.NewRegistry()
	builtin.Register(reg)
	reg.HandleFunc("Count/Hit", func(_ context.Context, req, reply []byte) ([]byte, error) {
		m.hits.Add(1)
		return append(reply, req...), nil
	})
	reg.HandleFunc("Count/Key", func(_ context.Context, req, reply []byte) ([]byte, error) {
		m.mu.Lock()
		m.keys[string(req)]++
		m.mu.Unlock()
		return reply, nil
	})
	reg.HandleFunc("Count/Once", func(_ context.Context, req, reply []byte) ([]byte, error) {
		m.hits.Add(1)
		m.mu.Lock()
		m.ids[binary.LittleEndian.Uint64(req)]++
		m.mu.Unlock()
		return append(reply, req...), nil
	})
	reg.HandleFunc("Count/Hold", func(ctx context.Context, _, reply []byte) ([]byte, error) {
		m.entered <- struct{}{}
		select {
		case <-m.release:
		case <-ctx.Done():
		}
		return reply, nil
	}, handler.Blocking())
	m.srv = reactor.New(reg, reactor.Options{Loops: 1})
	if err := m.srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	m.addr = m.srv.Addr().String()
	t.Cleanup(func() { stop(t, m.srv) })
	return m
}

func members(t *testing.T, n int) []*member {
	ms := make([]*member, n)
	for i := range ms {
		ms[i] = newMember(t)
	}
	return ms
}

// feed is a Resolver the test drives: each set sent is the service's.
type feed struct{ ch chan []client.Node }

func newFeed(nodes ...client.Node) *feed {
	f := &feed{ch: make(chan []client.Node, 16)}
	f.ch <- nodes
	return f
}

func (f *feed) Watch(ctx context.Context, _ string) (<-chan []client.Node, error) {
	out := make(chan []client.Node)
	go func() {
		defer close(out)
		for {
			select {
			case nodes := <-f.ch:
				select {
				case out <- nodes:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func nodesOf(ms ...*member) []client.Node {
	nodes := make([]client.Node, len(ms))
	for i, m := range ms {
		nodes[i] = client.Node{Addr: m.addr}
	}
	return nodes
}

func dialService(t *testing.T, target string, opts client.ServiceOptions) *client.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k, err := client.DialService(ctx, target, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

// callers runs n goroutines calling fn(caller, i) until stop is closed or
// each made max calls, and returns once they have ended.
func callers(n, max int, stop <-chan struct{}, fn func(caller, i int)) {
	var wg sync.WaitGroup
	for c := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < max; i++ {
				select {
				case <-stop:
					return
				default:
				}
				fn(c, i)
			}
		}()
	}
	wg.Wait()
}

// TestClusterRoundRobin: calls go to the nodes in turn, exactly evenly, and
// by weight.
func TestClusterRoundRobin(t *testing.T) {
	for _, tc := range []struct {
		name    string
		weights []int
	}{
		{"even", []int{0, 0, 0}},
		{"weighted", []int{1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := members(t, 3)
			nodes := nodesOf(ms...)
			total := 0
			for i, w := range tc.weights {
				nodes[i].Weight = w
				total += max(w, 1)
			}
			k := dialService(t, "svc", client.ServiceOptions{Resolver: client.Static(nodes...)})
			const rounds = 400
			var errs atomic.Int64
			callers(8, rounds*total/8, nil, func(_, _ int) {
				if _, err := k.CallRaw(context.Background(), "Count/Hit", nil, nil); err != nil {
					errs.Add(1)
				}
			})
			if errs.Load() != 0 {
				t.Fatalf("%d calls failed", errs.Load())
			}
			for i, m := range ms {
				if got, want := m.hits.Load(), int64(rounds*max(tc.weights[i], 1)); got != want {
					t.Errorf("node %d (weight %d): %d calls, want %d", i, tc.weights[i], got, want)
				}
			}
		})
	}
}

// TestClusterHashAffinity: calls with the same key reach the same node;
// keys spread over every node; when a node leaves, only its keys move.
func TestClusterHashAffinity(t *testing.T) {
	ms := members(t, 3)
	f := newFeed(nodesOf(ms...)...)
	k := dialService(t, "svc", client.ServiceOptions{Resolver: f, Balance: client.Hash})
	const keys = 300
	send := func() {
		callers(4, keys, nil, func(c, i int) {
			key := fmt.Sprintf("user-%d", i)
			ctx := client.WithAffinity(context.Background(), key)
			if _, err := k.CallRaw(ctx, "Count/Key", []byte(key), nil); err != nil {
				t.Error(err)
			}
		})
	}
	owners := func() map[string]int {
		own := map[string]int{}
		for j, m := range ms {
			m.mu.Lock()
			for key, n := range m.keys {
				if prev, ok := own[key]; ok {
					t.Errorf("key %s went to nodes %d and %d", key, prev, j)
				}
				own[key] = j
				if n != 4 {
					t.Errorf("key %s: %d calls on node %d, want 4", key, n, j)
				}
			}
			clear(m.keys)
			m.mu.Unlock()
		}
		return own
	}
	send()
	before := owners()
	if len(before) != keys {
		t.Fatalf("%d keys seen, want %d", len(before), keys)
	}
	share := make([]int, 3)
	for _, j := range before {
		share[j]++
	}
	for j, n := range share {
		if n < keys/10 {
			t.Errorf("node %d holds %d of %d keys", j, n, keys)
		}
	}
	t.Logf("keys per node: %v", share)

	// Node 2 leaves: its keys move, the others' stay.
	f.ch <- nodesOf(ms[0], ms[1])
	waitFor(t, func() bool { return len(k.Nodes()) == 2 })
	send()
	after := owners()
	moved := 0
	for key, j := range before {
		switch {
		case j != 2 && after[key] != j:
			t.Errorf("key %s moved from node %d to %d though its node stayed", key, j, after[key])
		case j == 2:
			moved++
		}
	}
	t.Logf("%d keys moved with their node", moved)
}

// TestClusterLeastInflight: calls go to the node with the fewest calls in
// flight for its weight.
func TestClusterLeastInflight(t *testing.T) {
	ms := members(t, 3)
	nodes := nodesOf(ms...)
	nodes[2].Weight = 2
	k := dialService(t, "svc", client.ServiceOptions{Resolver: client.Static(nodes...), Balance: client.LeastInflight})
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := k.CallRaw(context.Background(), "Count/Hold", nil, nil); err != nil {
				t.Error(err)
			}
		}()
		// One call at a time, so that each sees the load of those before
		// it: a call is counted on its node before it is sent.
		waitFor(t, func() bool { return countEntered(ms) == i+1 })
	}
	got := []int{len(ms[0].entered), len(ms[1].entered), len(ms[2].entered)}
	for _, m := range ms {
		close(m.release)
	}
	if got[0] != 2 || got[1] != 2 || got[2] != 4 {
		t.Fatalf("held calls per node %v, want [2 2 4] for weights 1, 1, 2", got)
	}
}

func countEntered(ms []*member) int {
	n := 0
	for _, m := range ms {
		n += len(m.entered)
	}
	return n
}

// cutProxy forwards connections to a server until cut, which closes its
// listener and every connection at once, as if the node's machine died:
// calls out on them are lost with no GoAway.
type cutProxy struct {
	ln    net.Listener
	addr  string
	mu    sync.Mutex
	conns []net.Conn
	cut   bool
	wg    sync.WaitGroup
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, addr: ln.Addr().String()}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				in.Close()
				out.Close()
				return
			}
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); io.Copy(out, in); out.Close() }()
			go func() { defer p.wg.Done(); io.Copy(in, out); in.Close() }()
		}
	}()
	t.Cleanup(p.kill)
	return p
}

func (p *cutProxy) kill() {
	p.mu.Lock()
	p.cut = true
	p.ln.Close()
	for _, c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0) // a reset, as from a dead peer's kernel
		}
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// TestClusterFailover: under load from 16 callers, a node dies (its
// connections reset), its registration is removed, a node joins, and
// another leaves by draining. Calls to an idempotent route all succeed;
// calls to another route fail only if they were out on the dead node, each
// with Unavailable and not marked Unprocessed, and none runs twice.
func TestClusterFailover(t *testing.T) {
	for _, tc := range []struct {
		name       string
		idempotent bool
	}{
		{"idempotent", true},
		{"not idempotent", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := members(t, 5)
			// Nodes 0 to 2 start; 0 is reached through a proxy that dies;
			// 3 joins; 1 drains and stops, as rpcd serve does on SIGTERM.
			px := newCutProxy(t, ms[0].addr)
			start := []client.Node{{Addr: px.addr}, {Addr: ms[1].addr}, {Addr: ms[2].addr}}
			f := newFeed(start...)
			opts := client.ServiceOptions{Resolver: f}
			if tc.idempotent {
				opts.Idempotent = client.RouteSet("Count/Once")
			}
			k := dialService(t, "svc", opts)

			const nCallers = 16
			var (
				next       atomic.Uint64
				ok, failed atomic.Int64
				mu         sync.Mutex
				errs       []error
				stop       = make(chan struct{})
				done       = make(chan struct{})
			)
			go func() {
				defer close(done)
				callers(nCallers, 1<<30, stop, func(_, _ int) {
					var req [8]byte
					binary.LittleEndian.PutUint64(req[:], next.Add(1))
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					reply, err := k.CallRaw(ctx, "Count/Once", req[:], nil)
					if err == nil && string(reply) != string(req[:]) {
						err = fmt.Errorf("reply %x to request %x", reply, req)
					}
					if err != nil {
						failed.Add(1)
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						return
					}
					ok.Add(1)
				})
			}()
			phase := func(what string) {
				base := ok.Load()
				waitFor(t, func() bool { return ok.Load() >= base+2000 })
				t.Logf("%s: %d calls succeeded so far", what, ok.Load())
			}
			phase("three nodes")
			px.kill() // node 0 dies with calls out on it
			phase("node 0 dead, still registered")
			f.ch <- []client.Node{{Addr: ms[1].addr}, {Addr: ms[2].addr}} // its lease expires
			phase("node 0 removed")
			f.ch <- []client.Node{{Addr: ms[1].addr}, {Addr: ms[2].addr}, {Addr: ms[3].addr}}
			waitFor(t, func() bool { return len(k.Nodes()) == 3 })
			phase("node 3 joined")
			// Node 1 drains: deregistered first, then shut down (GoAway,
			// calls in flight answered): nothing may fail for it.
			f.ch <- []client.Node{{Addr: ms[2].addr}, {Addr: ms[3].addr}}
			stop1 := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				stop1 <- ms[1].srv.Shutdown(ctx)
			}()
			phase("node 1 draining")
			if err := <-stop1; err != nil {
				t.Fatalf("node 1 shutdown: %v", err)
			}
			phase("node 1 gone")
			close(stop)
			<-done

			if ms[3].hits.Load() == 0 {
				t.Error("the node that joined took no calls")
			}
			ran := int64(0)
			for j, m := range ms {
				m.mu.Lock()
				for id, n := range m.ids {
					if n > 1 && !tc.idempotent {
						t.Errorf("call %d ran %d times on node %d", id, n, j)
					}
				}
				m.mu.Unlock()
				ran += m.hits.Load()
			}
			t.Logf("%d calls succeeded, %d failed, %d runs on the servers, %d retries", ok.Load(), failed.Load(), ran, k.Retries())
			if tc.idempotent && failed.Load() != 0 {
				t.Fatalf("%d idempotent calls failed, first: %v", failed.Load(), errs[0])
			}
			// Only calls out on the dead node may fail: at most one per caller.
			if failed.Load() > nCallers {
				t.Fatalf("%d calls failed, more than the %d callers could have had out on the dead node", failed.Load(), nCallers)
			}
			for _, err := range errs {
				var e *handler.Error
				if !errors.As(err, &e) || !errors.Is(err, handler.ErrUnavailable) || e.Unprocessed {
					t.Errorf("a failed call: %v (want Unavailable, not Unprocessed)", err)
				}
			}
		})
	}
}

// TestClusterCallAllocs: a raw call through a Cluster allocates no more
// than one through a plain Client to the same server, under every policy,
// without a timeout and under Options.Timeout (where both take their
// deadline from a context of their own, timeout.go).
func TestClusterCallAllocs(t *testing.T) {
	if raceOn {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	m := newMember(t)
	req := make([]byte, 16)
	reply := make([]byte, 0, 64)
	measure := func(call func(context.Context, string, []byte, []byte) ([]byte, error), ctx context.Context) float64 {
		for range 100 { // warm the pools
			reply, _ = call(ctx, builtin.EchoPacket, req, reply[:0])
		}
		return testing.AllocsPerRun(2000, func() {
			var err error
			if reply, err = call(ctx, builtin.EchoPacket, req, reply[:0]); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, opts := range []client.Options{{}, {Timeout: 5 * time.Second}} {
		ctx := context.Background()
		plain := measure(dial(t, m.addr, opts).CallRaw, ctx)
		for _, b := range []client.Balance{client.RoundRobin, client.LeastInflight, client.Hash} {
			k := dialService(t, "svc", client.ServiceOptions{Options: opts, Resolver: client.Static(client.Node{Addr: m.addr}), Balance: b})
			cctx := ctx
			if b == client.Hash {
				cctx = client.WithAffinity(ctx, "user-1") // made once: the call's own cost is measured
			}
			got := measure(k.CallRaw, cctx)
			t.Logf("%v, timeout %v: %.2f allocations per raw call through a Cluster, %.2f through a Client (client and server)", b, opts.Timeout, got, plain)
			if got > plain {
				t.Errorf("%v, timeout %v: %.2f allocations per call through a Cluster, more than %.2f through a Client", b, opts.Timeout, got, plain)
			}
		}
	}
}

// BenchmarkClusterCallRaw: parallel raw calls to one in-process server
// through a plain Client and through a Cluster of that one node, side by
// side: the cost of picking a node.
func BenchmarkClusterCallRaw(b *testing.B) {
	m := newMember(b)
	ctx := context.Background()
	c, err := client.Dial(ctx, m.addr, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	k, err := client.DialService(ctx, "svc", client.ServiceOptions{Resolver: client.Static(client.Node{Addr: m.addr})})
	if err != nil {
		b.Fatal(err)
	}
	defer k.Close()
	for _, tc := range []struct {
		name string
		call func(context.Context, string, []byte, []byte) ([]byte, error)
	}{
		{"Client", c.CallRaw},
		{"Cluster", k.CallRaw},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				req := make([]byte, 16)
				reply := make([]byte, 0, 64)
				for pb.Next() {
					var err error
					if reply, err = tc.call(ctx, builtin.EchoPacket, req, reply[:0]); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// mute is a Resolver that never gives a set, and says why.
type mute struct{ feed }

func (m *mute) LastError(string) error { return errors.New("rpcd: the registry has not answered") }

// TestDialServiceDialTimeout: with a resolver that never answers (an etcd
// that is down), DialService gives up after Options.DialTimeout even
// under a context that never ends, with the resolver's last error.
func TestDialServiceDialTimeout(t *testing.T) {
	m := &mute{feed{ch: make(chan []client.Node)}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a bound for a broken test
	defer cancel()
	t0 := time.Now()
	k, err := client.DialService(ctx, "svc", client.ServiceOptions{
		Resolver: m, Options: client.Options{DialTimeout: 200 * time.Millisecond}})
	took := time.Since(t0)
	if err == nil {
		k.Close()
		t.Fatal("DialService returned a Cluster with no set of nodes")
	}
	if handler.CodeOf(err) != proto.CodeUnavailable || !handler.IsUnprocessed(err) ||
		!strings.Contains(err.Error(), "the registry has not answered (gave up: no first set of nodes within the dial timeout of 200ms)") {
		t.Errorf("err %v; want Unavailable, unprocessed, with the resolver's last error", err)
	}
	if took > 5*time.Second {
		t.Errorf("gave up after %v, want about the dial timeout of 200ms", took)
	}
}
