package client_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// logSink is a slog.Handler that keeps the messages logged to it.
type logSink struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logSink) Enabled(context.Context, slog.Level) bool { return true }
func (l *logSink) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.msgs = append(l.msgs, r.Message)
	l.mu.Unlock()
	return nil
}
func (l *logSink) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logSink) WithGroup(string) slog.Handler      { return l }

// count returns how many times msg was logged.
func (l *logSink) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if m == msg {
			n++
		}
	}
	return n
}

// routeNode is a server of the routes it is given, each counting its
// calls, with Sys/Health answering by serving.
type routeNode struct {
	srv     *reactor.Server
	addr    string
	hits    map[string]*atomic.Int64
	serving atomic.Bool
}

func newRouteNode(t *testing.T, routes ...string) *routeNode {
	t.Helper()
	n := &routeNode{hits: map[string]*atomic.Int64{}}
	n.serving.Store(true)
	reg := handler.NewRegistry()
	for _, r := range routes {
		c := new(atomic.Int64)
		n.hits[r] = c
		reg.HandleFunc(r, func(_ context.Context, req, reply []byte) ([]byte, error) {
			c.Add(1)
			return append(reply, req...), nil
		})
	}
	builtin.HandleHealth(reg, n.serving.Load)
	n.srv = reactor.New(reg, reactor.Options{Loops: 1})
	if err := n.srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	n.addr = n.srv.Addr().String()
	t.Cleanup(func() { stop(t, n.srv) })
	return n
}

// refused returns how many calls n answered NotFound.
func (n *routeNode) refused() uint64 {
	return n.srv.Stats().Errors[transport.CodeSlot(proto.CodeNotFound)]
}

// spread returns the smallest and largest of counts.
func spread(counts ...int64) (lo, hi int64) {
	return slices.Min(counts), slices.Max(counts)
}

// TestClusterLastKnownGood: a resolver that sends an empty set while the
// nodes still answer does not empty the cluster: it keeps the last set,
// logs why, and every call succeeds; a set with nodes in it applies as
// usual; an empty set held while the last node stops answering applies
// once none answers.
func TestClusterLastKnownGood(t *testing.T) {
	ms := members(t, 3)
	f := newFeed(nodesOf(ms...)...)
	logs := &logSink{}
	k := dialService(t, "svc", client.ServiceOptions{Options: client.Options{Logger: slog.New(logs)}, Resolver: f})
	const held = "rpcd: the resolver lists no node of the service; keeping the last known nodes, which still answer"

	f.ch <- nil
	waitFor(t, func() bool { return logs.count(held) == 1 })
	if got := len(k.Nodes()); got != 3 {
		t.Fatalf("after an empty set, %d nodes, want the last 3", got)
	}
	for i := range 300 {
		if _, err := k.CallRaw(context.Background(), "Count/Hit", []byte{byte(i)}, nil); err != nil {
			t.Fatalf("call %d with the last set kept: %v", i, err)
		}
	}
	for i, m := range ms {
		if got := m.hits.Load(); got != 100 {
			t.Errorf("node %d: %d calls of 300, want 100", i, got)
		}
	}

	f.ch <- nodesOf(ms[0]) // a set with a node in it applies
	waitFor(t, func() bool { return len(k.Nodes()) == 1 })
	if logs.count("rpcd: the resolver lists nodes of the service again") != 1 {
		t.Error("no line says the resolver lists nodes again")
	}

	f.ch <- nil
	waitFor(t, func() bool { return logs.count(held) == 2 })
	stop(t, ms[0].srv) // the last node stops answering: the empty set applies
	waitFor(t, func() bool { return len(k.Nodes()) == 0 })
	if logs.count("rpcd: none of the last known nodes answers; the service has no node") != 1 {
		t.Error("no line says the empty set applied")
	}
	if _, err := k.CallRaw(context.Background(), "Count/Hit", nil, nil); !errors.Is(err, handler.ErrUnavailable) || !strings.Contains(err.Error(), "no usable node") {
		t.Errorf("a call with no node: %v", err)
	}
}

// TestClusterRoutes: a cluster sends a call only to the nodes that publish
// its route; a node that publishes no routes and answers NotFound,
// Unprocessed (it lacks the route) has the call sent on to another node
// and gets no more calls to that route; a route no node has fails
// NotFound, each node asked once.
func TestClusterRoutes(t *testing.T) {
	newNodes := func(t *testing.T) []*routeNode {
		// Node 3 lacks Count/Hit and alone has Other/Hit.
		return []*routeNode{newRouteNode(t, "Count/Hit"), newRouteNode(t, "Count/Hit"), newRouteNode(t, "Count/Hit"), newRouteNode(t, "Other/Hit")}
	}
	calls := func(t *testing.T, k *client.Cluster, route string, n int, futures bool) (notFound int64) {
		var bad atomic.Int64
		callers(4, n/4, nil, func(_, _ int) {
			var err error
			if futures {
				err = k.GoRaw(context.Background(), route, []byte("x")).Wait()
			} else {
				_, err = k.CallRaw(context.Background(), route, []byte("x"), nil)
			}
			if err != nil {
				if !errors.Is(err, handler.ErrNotFound) {
					t.Errorf("%s: %v", route, err)
				}
				bad.Add(1)
			}
		})
		return bad.Load()
	}

	t.Run("published", func(t *testing.T) {
		ns := newNodes(t)
		var nodes []client.Node
		for _, n := range ns {
			nodes = append(nodes, client.Node{Addr: n.addr, Routes: slices.Sorted(func(yield func(string) bool) {
				for r := range n.hits {
					if !yield(r) {
						return
					}
				}
			})})
		}
		k := dialService(t, "svc", client.ServiceOptions{Resolver: client.Static(nodes...)})
		if nf := calls(t, k, "Count/Hit", 3000, false); nf != 0 || ns[3].refused() != 0 {
			t.Errorf("%d of 3000 calls failed NotFound; the node without the route refused %d", nf, ns[3].refused())
		}
		lo, hi := spread(ns[0].hits["Count/Hit"].Load(), ns[1].hits["Count/Hit"].Load(), ns[2].hits["Count/Hit"].Load())
		t.Logf("Count/Hit per node that has it: %d to %d", lo, hi)
		if hi > lo*11/10 {
			t.Errorf("the nodes with the route took %d to %d calls, more than 10%% apart", lo, hi)
		}
		if nf := calls(t, k, "Other/Hit", 400, false); nf != 0 || ns[3].hits["Other/Hit"].Load() != 400 {
			t.Errorf("Other/Hit: %d NotFound, %d of 400 on the node that has it", nf, ns[3].hits["Other/Hit"].Load())
		}
	})

	for _, futures := range []bool{false, true} {
		t.Run(fmt.Sprintf("unpublished, futures %v", futures), func(t *testing.T) {
			ns := newNodes(t)
			k := dialService(t, "svc", client.ServiceOptions{Resolver: client.Static(client.Node{Addr: ns[0].addr}, client.Node{Addr: ns[1].addr}, client.Node{Addr: ns[2].addr}, client.Node{Addr: ns[3].addr})})
			if nf := calls(t, k, "Count/Hit", 3000, futures); nf != 0 {
				t.Errorf("%d of 3000 calls failed NotFound", nf)
			}
			// Each caller may meet the node once before it is marked.
			t.Logf("the node without the route refused %d calls; %d sent on", ns[3].refused(), k.Retries())
			if got := ns[3].refused(); got == 0 || got > 4 {
				t.Errorf("the node without the route refused %d calls, want 1 to 4 (one per caller at most)", got)
			}
		})
	}

	t.Run("no node has it", func(t *testing.T) {
		ns := newNodes(t)
		k := dialService(t, "svc", client.ServiceOptions{Resolver: client.Static(client.Node{Addr: ns[0].addr}, client.Node{Addr: ns[1].addr}, client.Node{Addr: ns[2].addr}, client.Node{Addr: ns[3].addr})})
		for i := range 3 {
			_, err := k.CallRaw(context.Background(), "No/Such", nil, nil)
			if !errors.Is(err, handler.ErrNotFound) {
				t.Fatalf("call %d to no route: %v", i, err)
			}
		}
		var asked uint64
		for _, n := range ns {
			asked += n.refused()
		}
		// The first call asks every node once; the next ones, one each.
		if asked != 4+2 {
			t.Errorf("3 calls to a route no node has asked %d times, want 6", asked)
		}
	})
}

// pauseProxy forwards connections to a server, and, once paused, holds
// the bytes, as a stopped process (SIGSTOP) would: connections stay open,
// nothing comes back.
type pauseProxy struct {
	ln     net.Listener
	addr   string
	mu     sync.Mutex
	paused bool
	resume chan struct{}
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newPauseProxy(t *testing.T, target string) *pauseProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pauseProxy{ln: ln, addr: ln.Addr().String(), resume: make(chan struct{})}
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
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			p.wg.Add(2)
			go p.pipe(out, in)
			go p.pipe(in, out)
		}
	}()
	t.Cleanup(p.close)
	return p
}

// pipe copies from src to dst, holding each chunk while paused.
func (p *pauseProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			paused, resume := p.paused, p.resume
			p.mu.Unlock()
			if paused {
				<-resume
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *pauseProxy) pause() {
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
}

func (p *pauseProxy) close() {
	p.mu.Lock()
	if p.paused {
		p.paused = false
		close(p.resume)
	}
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// TestClusterRoundRobinSpread: under round robin, the turns of a node that
// is listed but cannot take calls (its server is down, or paused and so
// ejected) go to the others evenly, not to the next in line: the
// survivors' calls are within 10% of each other, or of their weights.
func TestClusterRoundRobinSpread(t *testing.T) {
	for _, tc := range []struct {
		name    string
		paused  bool
		weights []int // of the survivors; the lost node's is 1
	}{
		{"down", false, []int{1, 1, 1}},
		{"paused", true, []int{1, 1, 1}},
		{"down, weighted", false, []int{1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := members(t, 4)
			lost := ms[3]
			nodes := nodesOf(ms...)
			for i, w := range tc.weights {
				nodes[i].Weight = w
			}
			var px *pauseProxy
			if tc.paused {
				px = newPauseProxy(t, lost.addr)
				nodes[3].Addr = px.addr
			}
			k := dialService(t, "svc", client.ServiceOptions{
				Options:  client.Options{MaxRetries: -1},
				Resolver: client.Static(nodes...),
				Ejection: client.Ejection{Duration: time.Hour},
			})
			if tc.paused {
				px.pause()
				// Its calls wait until their deadline; five in a row eject it.
				callers(5, 1, nil, func(_, _ int) {
					for {
						ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
						_, err := k.CallRaw(ctx, "Count/Hit", nil, nil)
						cancel()
						if err != nil {
							return
						}
					}
				})
				waitFor(t, func() bool { return ejected(k)[px.addr] })
			} else {
				stop(t, lost.srv)
				waitFor(t, func() bool {
					for _, n := range k.Nodes() {
						if n.Addr == lost.addr {
							return !n.Usable
						}
					}
					return false
				})
			}
			base := []int64{ms[0].hits.Load(), ms[1].hits.Load(), ms[2].hits.Load()}
			const total = 6000
			var failed atomic.Int64
			callers(8, total/8, nil, func(_, _ int) {
				if _, err := k.CallRaw(context.Background(), "Count/Hit", nil, nil); err != nil {
					failed.Add(1)
				}
			})
			if failed.Load() != 0 {
				t.Fatalf("%d calls failed", failed.Load())
			}
			per := make([]int64, 3) // calls per unit of weight
			got := make([]int64, 3)
			for i := range per {
				got[i] = ms[i].hits.Load() - base[i]
				per[i] = got[i] / int64(tc.weights[i])
			}
			lo, hi := spread(per...)
			t.Logf("survivors (weights %v): %v calls of %d", tc.weights, got, total)
			if hi > lo*11/10 {
				t.Errorf("survivors took %v calls for weights %v: %d to %d per unit of weight, more than 10%% apart", got, tc.weights, lo, hi)
			}
		})
	}
}

// TestClusterZone: a client in zone a sends its calls to the nodes of zone
// a while they are fit; with one of its two down, 70% of the calls stay
// in the zone (1.4 times the fit half) and 30% spill to zone b; with both
// down, all go to zone b. Hash and LeastInflight prefer the zone too;
// without a Zone, calls spread over every node.
func TestClusterZone(t *testing.T) {
	ms := members(t, 4) // a0, a1, b0, b1
	nodes := nodesOf(ms...)
	for i, z := range []string{"a", "a", "b", "b"} {
		nodes[i].Meta = map[string]string{client.ZoneKey: z}
	}
	hits := func(n int, k *client.Cluster, ctx func(i int) context.Context) []int64 {
		base := make([]int64, 4)
		for i, m := range ms {
			base[i] = m.hits.Load()
		}
		for i := range n {
			if _, err := k.CallRaw(ctx(i), "Count/Hit", nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		out := make([]int64, 4)
		for i, m := range ms {
			out[i] = m.hits.Load() - base[i]
		}
		return out
	}
	plain := func(int) context.Context { return context.Background() }
	k := dialService(t, "svc", client.ServiceOptions{Resolver: client.Static(nodes...), Zone: "a"})
	none := dialService(t, "svc", client.ServiceOptions{Resolver: client.Static(nodes...)})
	least := dialService(t, "svc", client.ServiceOptions{Resolver: client.Static(nodes...), Zone: "a", Balance: client.LeastInflight})
	hash := dialService(t, "svc", client.ServiceOptions{Resolver: client.Static(nodes...), Zone: "a", Balance: client.Hash})

	if got := hits(1000, k, plain); !slices.Equal(got, []int64{500, 500, 0, 0}) {
		t.Errorf("zone a fit: calls per node %v, want [500 500 0 0]", got)
	}
	if got := hits(400, none, plain); !slices.Equal(got, []int64{100, 100, 100, 100}) {
		t.Errorf("no zone: calls per node %v, want [100 100 100 100]", got)
	}
	if got := hits(400, least, plain); got[2]+got[3] != 0 {
		t.Errorf("least in flight, zone a fit: calls per node %v, want none in zone b", got)
	}
	if got := hits(400, hash, func(i int) context.Context { return client.WithAffinity(context.Background(), fmt.Sprint("user-", i)) }); got[2]+got[3] != 0 || got[0] == 0 || got[1] == 0 {
		t.Errorf("hash, zone a fit: keys per node %v, want them all in zone a, on both nodes", got)
	}

	stop(t, ms[1].srv)
	unusable := func(addr string) func() bool {
		return func() bool {
			for _, n := range k.Nodes() {
				if n.Addr == addr {
					return !n.Usable
				}
			}
			return false
		}
	}
	waitFor(t, unusable(ms[1].addr))
	got := hits(1000, k, plain)
	t.Logf("zone a half down: calls per node %v", got)
	if got[0] != 700 || got[1] != 0 || got[2]+got[3] != 300 || got[2] < 140 || got[3] < 140 {
		t.Errorf("zone a half down: calls per node %v, want [700 0 ~150 ~150]", got)
	}

	stop(t, ms[0].srv)
	waitFor(t, unusable(ms[0].addr))
	if got := hits(1000, k, plain); !slices.Equal(got, []int64{0, 0, 500, 500}) {
		t.Errorf("zone a down: calls per node %v, want [0 0 500 500]", got)
	}
}

// TestClusterHealthCheck: with health checks on, a node whose Sys/Health
// says NOT_SERVING gets no calls until it says SERVING again; a paused
// node, whose checks time out, gets none either, and no call fails; a
// node without the route counts as serving; a node whose health turns
// NOT_SERVING in its zone spills the zone's calls.
func TestClusterHealthCheck(t *testing.T) {
	ns := []*routeNode{newRouteNode(t, "Count/Hit"), newRouteNode(t, "Count/Hit"), newRouteNode(t, "Count/Hit")}
	plain := newMember(t) // no Sys/Health
	px := newPauseProxy(t, ns[2].addr)
	logs := &logSink{}
	k := dialService(t, "svc", client.ServiceOptions{
		Options:     client.Options{Logger: slog.New(logs)},
		Resolver:    client.Static(client.Node{Addr: ns[0].addr}, client.Node{Addr: ns[1].addr}, client.Node{Addr: px.addr}, client.Node{Addr: plain.addr}),
		HealthCheck: client.HealthCheck{Interval: 20 * time.Millisecond},
	})
	serving := func() map[string]bool {
		out := map[string]bool{}
		for _, n := range k.Nodes() {
			out[n.Addr] = n.Serving
		}
		return out
	}
	call := func(n int) (failed int) {
		for range n {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if _, err := k.CallRaw(ctx, "Count/Hit", nil, nil); err != nil {
				failed++
			}
			cancel()
		}
		return failed
	}
	counts := func() []int64 {
		return []int64{ns[0].hits["Count/Hit"].Load(), ns[1].hits["Count/Hit"].Load(), ns[2].hits["Count/Hit"].Load(), plain.hits.Load()}
	}
	time.Sleep(100 * time.Millisecond) // some checks
	if s := serving(); !s[ns[0].addr] || !s[plain.addr] {
		t.Fatalf("serving %v, want every node", s)
	}

	ns[1].serving.Store(false)
	waitFor(t, func() bool { return !serving()[ns[1].addr] })
	before := counts()
	if failed := call(300); failed != 0 {
		t.Fatalf("%d calls failed", failed)
	}
	after := counts()
	if d := after[1] - before[1]; d != 0 {
		t.Errorf("the node saying NOT_SERVING took %d calls", d)
	}
	// At least once: on a loaded machine another node's check may time out
	// too, and be logged.
	if logs.count("rpcd: node not serving; calls go to others") < 1 {
		t.Error("no line says the node does not serve")
	}

	ns[1].serving.Store(true)
	waitFor(t, func() bool { return serving()[ns[1].addr] })
	before = counts()
	call(300)
	if d := counts()[1] - before[1]; d != 75 {
		t.Errorf("serving again, the node took %d of 300 calls, want 75", d)
	}

	px.pause()
	waitFor(t, func() bool { return !serving()[px.addr] })
	before = counts()
	if failed := call(300); failed != 0 {
		t.Errorf("with a paused node out by its health checks, %d calls failed", failed)
	}
	after = counts()
	t.Logf("with the paused node out: calls per node %v", []int64{after[0] - before[0], after[1] - before[1], after[2] - before[2], after[3] - before[3]})
	if after[0]-before[0] != 100 || after[1]-before[1] != 100 || after[3]-before[3] != 100 {
		t.Errorf("the three serving nodes took %v of 300 calls, want 100 each", []int64{after[0] - before[0], after[1] - before[1], after[3] - before[3]})
	}
}

// TestClusterHealthDrain: a node that begins to drain is not serving by
// its health checks, whether its Sys/Health says NOT_SERVING (as rpcd
// serve's does from the signal on) or, once it sends its GoAway, it
// refuses the check while calls are still on it.
func TestClusterHealthDrain(t *testing.T) {
	a, b := newRouteNode(t, "Count/Hit"), newMember(t) // b has no Sys/Health: serving while it answers
	k := dialService(t, "svc", client.ServiceOptions{
		Resolver:    client.Static(client.Node{Addr: a.addr}, client.Node{Addr: b.addr}),
		HealthCheck: client.HealthCheck{Interval: 20 * time.Millisecond},
	})
	serving := func(addr string) bool {
		for _, n := range k.Nodes() {
			if n.Addr == addr {
				return n.Serving
			}
		}
		return false
	}
	waitFor(t, func() bool { return serving(a.addr) && serving(b.addr) })
	a.serving.Store(false) // the signal: Sys/Health says NOT_SERVING
	waitFor(t, func() bool { return !serving(a.addr) })

	hold := make(chan error, 1)
	go func() { // to b: a is not serving
		_, err := k.CallRaw(context.Background(), "Count/Hold", nil, nil)
		hold <- err
	}()
	<-b.entered
	drained := make(chan struct{})
	go func() { stop(t, b.srv); close(drained) }() // the drain: a GoAway, the held call still on
	waitFor(t, func() bool { return !serving(b.addr) })
	close(b.release)
	if err := <-hold; err != nil {
		t.Errorf("the call held through the drain: %v", err)
	}
	<-drained
}

// TestClusterRetryBudget: while every node fails calls in a way the retry
// rules send again, the retry budget stops the retries once half its
// tokens are spent, where without one every call is sent MaxRetries times
// more; once calls succeed again, they earn the retries back.
func TestClusterRetryBudget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget client.RetryBudget
	}{
		{"none", client.RetryBudget{MaxTokens: -1}},
		{"default", client.RetryBudget{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := [2]*flaky{newFlaky(t, proto.CodeUnavailable), newFlaky(t, proto.CodeUnavailable)}
			k := dialService(t, "svc", client.ServiceOptions{
				Options: client.Options{
					MaxRetries: 3, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
					Idempotent: client.RouteSet("T/Hit"),
				},
				Resolver:    client.Static(client.Node{Addr: nodes[0].addr}, client.Node{Addr: nodes[1].addr}),
				Ejection:    client.Ejection{Failures: -1},
				RetryBudget: tc.budget,
			})
			attempts := func() int64 { return nodes[0].hits.Load() + nodes[1].hits.Load() }
			if failed := hitN(k, 200); failed != 200 {
				t.Fatalf("%d of 200 calls to failing nodes failed", failed)
			}
			t.Logf("200 failing calls: %d attempts, %d retries, %d kept back by the budget", attempts(), k.Retries(), k.Throttled())
			if tc.budget.MaxTokens < 0 {
				if attempts() != 800 {
					t.Errorf("without a budget, %d attempts, want 800", attempts())
				}
				return
			}
			// Every failed attempt takes one of the 100 tokens (a call's
			// last, fourth, too, as gRPC's do), and is sent again only
			// while more than 50 are left: 12 calls retried 3 times, the
			// 13th once, then none.
			if got := attempts(); got != 200+37 {
				t.Errorf("with the default budget, %d attempts, want 237", got)
			}

			// 520 calls that succeed earn 52 tokens: a failing call is
			// sent again once, and no more (its retry's failure leaves 50).
			for _, n := range nodes {
				n.fail.Store(uint32(proto.CodeOK))
			}
			if failed := hitN(k, 520); failed != 0 {
				t.Fatalf("%d calls failed", failed)
			}
			for _, n := range nodes {
				n.fail.Store(uint32(proto.CodeUnavailable))
			}
			before := attempts()
			hitN(k, 1)
			if got := attempts() - before; got != 2 {
				t.Errorf("after 520 successes, a failing call made %d attempts, want 2 (one retry earned)", got)
			}
		})
	}
}

// TestClusterZoneAllocs: a raw call through a Cluster whose nodes publish
// routes and zones, with a Zone and health checks, allocates no more than
// one through a plain Client.
func TestClusterZoneAllocs(t *testing.T) {
	if raceOn {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	m := newMember(t)
	req := make([]byte, 16)
	reply := make([]byte, 0, 64)
	measure := func(call func(context.Context, string, []byte, []byte) ([]byte, error)) float64 {
		for range 100 {
			reply, _ = call(context.Background(), builtin.EchoPacket, req, reply[:0])
		}
		return testing.AllocsPerRun(2000, func() {
			var err error
			if reply, err = call(context.Background(), builtin.EchoPacket, req, reply[:0]); err != nil {
				t.Fatal(err)
			}
		})
	}
	plain := measure(dial(t, m.addr, client.Options{}).CallRaw)
	node := client.Node{Addr: m.addr, Routes: []string{builtin.EchoPacket, "Count/Hit"}, Meta: map[string]string{client.ZoneKey: "a"}}
	other := client.Node{Addr: newMember(t).addr, Routes: []string{"Count/Hit"}, Meta: map[string]string{client.ZoneKey: "b"}}
	k := dialService(t, "svc", client.ServiceOptions{
		Resolver: client.Static(node, other), Zone: "a",
		HealthCheck: client.HealthCheck{Interval: time.Hour},
	})
	got := measure(k.CallRaw)
	t.Logf("%.2f allocations per raw call through a Cluster with routes and zones, %.2f through a Client", got, plain)
	if got > plain {
		t.Errorf("%.2f allocations per call through a Cluster with routes and zones, more than %.2f through a Client", got, plain)
	}
}
