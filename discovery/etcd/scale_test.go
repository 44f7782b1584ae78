package etcd_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/discovery/etcd"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/internal/etcdtest"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// load runs callers of route through k until stop is closed, counting the
// calls that succeed and those that fail.
type load struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	errs       []error
	stop       chan struct{}
	wg         sync.WaitGroup
}

func startLoad(k *client.Cluster, route string, callers int) *load {
	l := &load{stop: make(chan struct{})}
	for range callers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				case <-time.After(time.Millisecond):
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := k.CallRaw(ctx, route, []byte("x"), nil)
				cancel()
				if err != nil {
					l.failed.Add(1)
					l.mu.Lock()
					l.errs = append(l.errs, err)
					l.mu.Unlock()
				} else {
					l.ok.Add(1)
				}
			}
		}()
	}
	return l
}

func (l *load) end() {
	close(l.stop)
	l.wg.Wait()
}

// TestLeaseRevoked: the leases of all three nodes of a service are revoked
// in etcd at once (as an operator, or an etcd that lost them, would): the
// client gets an empty set and keeps the last one, whose nodes still
// answer, and says so; each node finds its lease gone at its next renewal,
// registers again under a new lease, and logs it; the client has the three
// again. No call fails.
func TestLeaseRevoked(t *testing.T) {
	const ttl = 3 * time.Second // renewed every second
	ep := etcdtest.Start(t)
	ps := []*process{startProcess(t, ep, "echo", ttl), startProcess(t, ep, "echo", ttl), startProcess(t, ep, "echo", ttl)}
	admin := etcdClient(t, ep)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logs := newRecorder()
	k, err := client.DialService(ctx, "etcd://"+ep+"/echo", client.ServiceOptions{Options: client.Options{Logger: slog.New(logs)}})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	waitFor(t, "three nodes", func() bool { return len(k.Nodes()) == 3 })
	l := startLoad(k, "Count/Hit", 4)
	time.Sleep(200 * time.Millisecond)

	resp, err := admin.Get(ctx, etcd.Prefix, clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 3 {
		t.Fatalf("keys %v, %v", resp, err)
	}
	revokedAt := time.Now()
	for _, kv := range resp.Kvs {
		if _, err := admin.Revoke(ctx, clientv3.LeaseID(kv.Lease)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the client keeps its last set", func() bool {
		_, ok := logs.first(revokedAt, "rpcd: the resolver lists no node of the service; keeping the last known nodes, which still answer")
		return ok
	})
	for i, p := range ps {
		var rec logRecord
		waitFor(t, "node registered again", func() bool {
			var ok bool
			rec, ok = p.log.first(revokedAt, "rpcd: registered again")
			return ok
		})
		t.Logf("node %d registered again %v after its lease was revoked", i, rec.at.Sub(revokedAt).Round(time.Millisecond))
		if took := rec.at.Sub(revokedAt); took > ttl/3+2*time.Second {
			t.Errorf("node %d registered again %v after its lease was revoked, want within a renewal and 2s", i, took)
		}
	}
	waitFor(t, "the client lists the nodes again", func() bool {
		_, ok := logs.first(revokedAt, "rpcd: the resolver lists nodes of the service again")
		return ok && len(k.Nodes()) == 3
	})
	time.Sleep(200 * time.Millisecond)
	l.end()
	t.Logf("%d calls succeeded, %d failed", l.ok.Load(), l.failed.Load())
	if l.failed.Load() != 0 {
		t.Errorf("%d calls failed, first: %v", l.failed.Load(), l.errs[0])
	}
}

// relay forwards connections to a server until killed, which resets them
// all at once, as the death of the server's process (kill -9) would.
type relay struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func newRelay(t *testing.T, addr, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
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
			r.mu.Lock()
			r.conns = append(r.conns, in, out)
			r.mu.Unlock()
			r.wg.Add(2)
			go func() { defer r.wg.Done(); io.Copy(out, in); out.Close() }()
			go func() { defer r.wg.Done(); io.Copy(in, out); in.Close() }()
		}
	}()
	t.Cleanup(r.kill)
	return r
}

func (r *relay) kill() {
	r.ln.Close()
	r.mu.Lock()
	for _, c := range r.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
	}
	r.conns = nil
	r.mu.Unlock()
	r.wg.Wait()
}

// TestFreshRegistration: a node dies (its connections reset) with six
// calls on it, which eject it; it comes back at the same address, and its
// client reconnects, but it stays ejected until it registers afresh (a new
// lease): then it is back in the balancing at once, not after the
// ejection's hour.
func TestFreshRegistration(t *testing.T) {
	ep := etcdtest.Start(t)
	cli := etcdClient(t, ep)
	a := startNode(t, cli, "svc", 0) // publishes Count/Hit only

	// b serves Count/Hold too, through a relay: the address it registers.
	var bHits atomic.Int64
	entered, release := make(chan struct{}, 16), make(chan struct{})
	reg := handler.NewRegistry()
	reg.HandleFunc("Count/Hit", func(_ context.Context, req, reply []byte) ([]byte, error) {
		bHits.Add(1)
		return append(reply, req...), nil
	})
	reg.HandleFunc("Count/Hold", func(ctx context.Context, _, reply []byte) ([]byte, error) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return reply, nil
	}, handler.Blocking())
	b := reactor.New(reg, reactor.Options{Loops: 1})
	if err := b.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		close(release)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b.Shutdown(ctx)
	})
	px := newRelay(t, "127.0.0.1:0", b.Addr().String())
	bAddr := px.ln.Addr().String()
	bNode := client.Node{Addr: bAddr, Routes: []string{"Count/Hit", "Count/Hold"}}
	register := func() *clientv3.Client { // a process of b: an etcd client of its own
		c, err := etcd.NewClient([]string{ep})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := etcd.Register(ctx, c, "svc", bNode, etcd.RegisterOptions{TTL: 10 * time.Second}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	first := register()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	k, err := client.DialService(ctx, "etcd://"+ep+"/svc", client.ServiceOptions{Ejection: client.Ejection{Duration: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	waitFor(t, "two nodes", func() bool { return len(k.Nodes()) == 2 })
	var futs []*client.Future
	for range 6 {
		futs = append(futs, k.GoRaw(ctx, "Count/Hold", nil))
		<-entered
	}

	// kill -9: its connections reset, its process (its etcd client) gone,
	// its lease left to run out.
	px.kill()
	first.Close()
	for _, f := range futs {
		if err := f.Wait(); !errors.Is(err, handler.ErrUnavailable) {
			t.Fatalf("a call out on the killed node: %v, want Unavailable", err)
		}
	}
	ejected := func() bool {
		for _, n := range k.Nodes() {
			if n.Addr == bAddr {
				return n.Ejected
			}
		}
		return false
	}
	if !ejected() {
		t.Fatal("six calls lost on the node did not eject it")
	}

	// Back at the same address: its client reconnects, yet it stays out.
	newRelay(t, bAddr, b.Addr().String())
	waitFor(t, "the node's client reconnected", func() bool {
		for _, n := range k.Nodes() {
			if n.Addr == bAddr {
				return n.Usable
			}
		}
		return false
	})
	before := bHits.Load()
	for range 20 {
		if _, err := k.CallRaw(ctx, "Count/Hit", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if bHits.Load() != before || !ejected() {
		t.Fatalf("reconnected but not registered afresh, the node took %d calls (ejected %v); want none", bHits.Load()-before, ejected())
	}

	registeredAt := time.Now()
	second := register()
	t.Cleanup(func() { second.Close() })
	waitFor(t, "the node back in the balancing", func() bool { return !ejected() })
	t.Logf("back %v after it registered afresh", time.Since(registeredAt).Round(time.Millisecond))
	before, beforeA := bHits.Load(), a.hits.Load()
	for range 20 {
		if _, err := k.CallRaw(ctx, "Count/Hit", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got, gotA := bHits.Load()-before, a.hits.Load()-beforeA; got != 10 || gotA != 10 {
		t.Errorf("registered afresh, the node took %d of 20 calls and the other %d, want 10 each", got, gotA)
	}
}

// TestRoutesEtcd: of four nodes registered by rpcd's etcd registry, one
// lacks the route the calls go to, and its registration says so: no call
// fails NotFound, that node refuses none, and the three others share the
// calls evenly.
func TestRoutesEtcd(t *testing.T) {
	ep := etcdtest.Start(t)
	cli := etcdClient(t, ep)
	ns := []*node{startNode(t, cli, "svc", 0), startNode(t, cli, "svc", 0), startNode(t, cli, "svc", 0)}
	reg := handler.NewRegistry()
	reg.HandleFunc("Other/Hit", func(_ context.Context, req, reply []byte) ([]byte, error) { return reply, nil })
	other := reactor.New(reg, reactor.Options{Loops: 1})
	if err := other.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		other.Shutdown(ctx)
	})
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	otherReg, err := etcd.Register(rctx, cli, "svc", client.Node{Addr: other.Addr().String(), Routes: []string{"Other/Hit"}}, etcd.RegisterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { otherReg.Deregister(context.Background()) })

	k, err := client.DialService(rctx, "etcd://"+ep+"/svc", client.ServiceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	waitFor(t, "four nodes", func() bool { return len(k.Nodes()) == 4 })
	l := startLoad(k, "Count/Hit", 4)
	time.Sleep(time.Second)
	l.end()
	refused := other.Stats().Errors[transport.CodeSlot(proto.CodeNotFound)]
	hits := []int64{ns[0].hits.Load(), ns[1].hits.Load(), ns[2].hits.Load()}
	t.Logf("%d calls succeeded, %d failed; per node with the route %v; the node without it refused %d", l.ok.Load(), l.failed.Load(), hits, refused)
	if l.failed.Load() != 0 || refused != 0 {
		t.Errorf("%d calls failed, %d refused NotFound by the node without the route", l.failed.Load(), refused)
	}
	lo, hi := min(hits[0], hits[1], hits[2]), max(hits[0], hits[1], hits[2])
	if hi > lo*11/10 {
		t.Errorf("calls per node %v, more than 10%% apart", hits)
	}
}
