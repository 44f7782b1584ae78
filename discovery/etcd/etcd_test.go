package etcd_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/discovery/etcd"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/etcdtest"
	"github.com/rpcd/rpcd/internal/leaktest"
	"github.com/rpcd/rpcd/reactor"
)

func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	leaktest.VerifyTestMain(m) // an embedded etcd leaves no goroutine behind once closed
}

func etcdClient(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := etcd.NewClient([]string{endpoint})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// node is an rpcd server on loopback registered in etcd as a node of a
// service; its Count/Hit route counts its calls.
type node struct {
	srv  *reactor.Server
	addr string
	reg  *etcd.Registration
	hits atomic.Int64
}

func startNode(t *testing.T, cli *clientv3.Client, service string, weight int) *node {
	t.Helper()
	return startNodeTTL(t, cli, service, weight, 2*time.Second)
}

// startNodeTTL is startNode with a lease of ttl.
func startNodeTTL(t *testing.T, cli *clientv3.Client, service string, weight int, ttl time.Duration) *node {
	t.Helper()
	n := &node{}
	reg := handler.NewRegistry()
	builtin.Register(reg)
	reg.HandleFunc("Count/Hit", func(_ context.Context, req, reply []byte) ([]byte, error) {
		n.hits.Add(1)
		return append(reply, req...), nil
	})
	n.srv = reactor.New(reg, reactor.Options{Loops: 1})
	if err := n.srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	n.addr = n.srv.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	n.reg, err = etcd.Register(ctx, cli, service, client.Node{Addr: n.addr, Weight: weight, Routes: []string{"Count/Hit"}, Meta: map[string]string{"zone": "test"}}, etcd.RegisterOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.stop(t) })
	return n
}

// stop drains n as rpcd serve does: out of etcd first, then shut down.
func (n *node) stop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.reg.Deregister(ctx); err != nil {
		t.Errorf("Deregister: %v", err)
	}
	if err := n.srv.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 15s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func addrs(k *client.Cluster) []string {
	var out []string
	for _, n := range k.Nodes() {
		out = append(out, n.Addr)
	}
	return out
}

// TestRegisterAndResolve: a registered node is listed with its weight,
// routes and metadata; Deregister removes it at once; the resolver
// reports both.
func TestRegisterAndResolve(t *testing.T) {
	ep := etcdtest.Start(t)
	cli := etcdClient(t, ep)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := etcd.NewResolver(cli)
	updates, err := r.Watch(ctx, "svc")
	if err != nil {
		t.Fatal(err)
	}
	if first := <-updates; len(first) != 0 {
		t.Fatalf("first set %v, want none", first)
	}
	want := client.Node{Addr: "127.0.0.1:7070", Weight: 3, Routes: []string{"A/B"}, Meta: map[string]string{"zone": "a"}}
	reg, err := etcd.Register(ctx, cli, "svc", want, etcd.RegisterOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	got := <-updates
	if len(got) != 1 || got[0].Addr != want.Addr || got[0].Weight != 3 || !slices.Equal(got[0].Routes, want.Routes) || got[0].Meta["zone"] != "a" {
		t.Fatalf("after Register: %+v, want [%+v]", got, want)
	}
	// The lease is kept alive past its TTL.
	time.Sleep(2500 * time.Millisecond)
	resp, err := cli.Get(ctx, etcd.Key("svc", want.Addr))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("after 2.5 TTLs the key is gone (%v, %v)", resp, err)
	}
	if err := reg.Deregister(ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-updates; len(got) != 0 {
		t.Fatalf("after Deregister: %+v, want none", got)
	}
	if err := reg.Deregister(ctx); err != nil {
		t.Fatalf("Deregister twice: %v", err)
	}
}

// TestLeaseExpires: a node that stops keeping its lease alive (its
// process died) leaves the set once the TTL has run out.
func TestLeaseExpires(t *testing.T) {
	ep := etcdtest.Start(t)
	cli := etcdClient(t, ep)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lease, err := cli.Grant(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, etcd.Key("svc", "127.0.0.1:1"), `{"addr":"127.0.0.1:1"}`, clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	updates, err := etcd.NewResolver(cli).Watch(ctx, "svc")
	if err != nil {
		t.Fatal(err)
	}
	if first := <-updates; len(first) != 1 {
		t.Fatalf("first set %v, want the node", first)
	}
	select {
	case got := <-updates:
		if len(got) != 0 {
			t.Fatalf("after the TTL: %v, want none", got)
		}
	case <-ctx.Done():
		t.Fatal("the node outlived its lease")
	}
}

// TestKeyPutBack: a registration's key that someone deletes while its
// lease lives is put back, under the same lease; a revoked lease is
// replaced by a new one.
func TestKeyPutBack(t *testing.T) {
	ep := etcdtest.Start(t)
	cli := etcdClient(t, ep)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	node := client.Node{Addr: "127.0.0.1:7070"}
	reg, err := etcd.Register(ctx, cli, "svc", node, etcd.RegisterOptions{TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Deregister(ctx)
	lease := func() clientv3.LeaseID {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			resp, err := cli.Get(ctx, reg.Key())
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Kvs) == 1 {
				return clientv3.LeaseID(resp.Kvs[0].Lease)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("the key %s is not back within 5 s", reg.Key())
		return 0
	}
	first := lease()
	if _, err := cli.Delete(ctx, reg.Key()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the watch sees the delete
	if l := lease(); l != first {
		t.Errorf("put back under lease %x, want the same %x", l, first)
	}
	if _, err := cli.Revoke(ctx, first); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if l := lease(); l == first || l == 0 {
		t.Errorf("after the lease was revoked: lease %x, want a new one", l)
	}
}

// TestDialServiceEtcd: three nodes registered in a real etcd, a client
// dialling "etcd://endpoint/NAME": round robin spreads calls exactly
// evenly; a node that deregisters stops getting calls; one that registers
// starts getting them; a Cluster closes cleanly.
func TestDialServiceEtcd(t *testing.T) {
	ep := etcdtest.Start(t)
	cli := etcdClient(t, ep)
	nodes := []*node{startNode(t, cli, "echo", 0), startNode(t, cli, "echo", 0), startNode(t, cli, "echo", 0)}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	k, err := client.DialService(ctx, "etcd://"+ep+"/echo", client.ServiceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if got := addrs(k); len(got) != 3 {
		t.Fatalf("nodes %v, want 3", got)
	}
	for i := range 300 {
		if _, err := k.CallRaw(ctx, "Count/Hit", []byte{byte(i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range nodes {
		if got := n.hits.Load(); got != 100 {
			t.Errorf("node %d: %d calls of 300, want 100", i, got)
		}
	}

	// Node 0 leaves the registry: no new call reaches it.
	if err := nodes[0].reg.Deregister(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "node 0 gone from the client", func() bool { return len(k.Nodes()) == 2 })
	before := nodes[0].hits.Load()
	for i := range 100 {
		if _, err := k.CallRaw(ctx, "Count/Hit", []byte{byte(i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := nodes[0].hits.Load(); got != before {
		t.Errorf("a deregistered node took %d calls", got-before)
	}
	waitFor(t, "node 0's connection closed", func() bool { return nodes[0].srv.Conns() == 0 })

	// A fourth node joins.
	n3 := startNode(t, cli, "echo", 2)
	waitFor(t, "node 3 in the client", func() bool { return slices.Contains(addrs(k), n3.addr) })
	for i := range 400 {
		if _, err := k.CallRaw(ctx, "Count/Hit", []byte{byte(i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := n3.hits.Load(); got != 200 {
		t.Errorf("node 3 (weight 2 of 4): %d calls of 400, want 200", got)
	}
}

// TestDialServiceErrors: a target with no resolver or no name fails with a
// message that says so; an unreachable etcd fails within the context.
func TestDialServiceErrors(t *testing.T) {
	for _, target := range []string{"nosuch://x/echo", "etcd://127.0.0.1:1", "etcd:///echo", "echo"} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := client.DialService(ctx, target, client.ServiceOptions{})
		cancel()
		if err == nil {
			t.Errorf("DialService(%q) succeeded", target)
			continue
		}
		t.Logf("%s: %v", target, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := client.DialService(ctx, "etcd://127.0.0.1:1/echo", client.ServiceOptions{})
	if err == nil || !strings.Contains(err.Error(), "etcd at 127.0.0.1:1 has not answered") || !strings.Contains(err.Error(), "-etcd-tls") {
		t.Errorf("DialService to an etcd that is not there: %v; want it to say etcd has not answered, and what commonly keeps it", err)
	}
}

// TestSecureEtcd: against an etcd that serves TLS only, asks for client
// certificates and has authentication on, a node registers and a client
// finds it through a scheme registered with the same Config; without the
// password, the user, the client certificate, TLS, or with a CA that did
// not sign etcd's certificate, registering fails.
func TestSecureEtcd(t *testing.T) {
	s := etcdtest.StartSecure(t)
	tlsCfg, err := etcd.TLSFiles(s.CA, s.ClientCert, s.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg := etcd.Config{Endpoints: []string{s.Endpoint}, TLS: tlsCfg, Username: s.User, Password: s.Password}
	cli, err := etcd.Connect(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	// A lease long enough that a loaded machine (the whole suite under
	// -race, TLS and authentication on every request) cannot let it lapse
	// between Grant and the first keep-alive.
	n := startNodeTTL(t, cli, "secure", 0, 30*time.Second)

	etcd.RegisterScheme("etcd-secure-test", cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	k, err := client.DialService(ctx, "etcd-secure-test://"+s.Endpoint+"/secure", client.ServiceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if got := addrs(k); !slices.Equal(got, []string{n.addr}) {
		t.Fatalf("nodes %v, want [%s]", got, n.addr)
	}
	if _, err := k.CallRaw(ctx, "Count/Hit", []byte("x"), nil); err != nil || n.hits.Load() != 1 {
		t.Fatalf("call through the secured registry: %v (hits %d)", err, n.hits.Load())
	}

	// Connect refuses a wrong password at once; the others fail at the
	// first request.
	wrong := cfg
	wrong.Password = "not-it"
	if cli, err := etcd.Connect(wrong); err == nil {
		cli.Close()
		t.Error("Connect with a wrong password succeeded")
	} else {
		t.Logf("wrong password: %v", err)
	}
	otherCA, err := etcd.TLSFiles(s.OtherCA, s.ClientCert, s.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	noCert, err := etcd.TLSFiles(s.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  etcd.Config
	}{
		{"no user", etcd.Config{TLS: tlsCfg}},
		{"no TLS", etcd.Config{Username: s.User, Password: s.Password}},
		{"no client certificate", etcd.Config{TLS: noCert, Username: s.User, Password: s.Password}},
		{"another CA", etcd.Config{TLS: otherCA, Username: s.User, Password: s.Password}},
	} {
		tc.cfg.Endpoints = []string{s.Endpoint}
		tc.cfg.DialTimeout = time.Second
		cli, err := etcd.Connect(tc.cfg)
		if err != nil {
			t.Logf("%s: Connect: %v", tc.name, err)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		reg, err := etcd.Register(ctx, cli, "secure", client.Node{Addr: "127.0.0.1:1"}, etcd.RegisterOptions{})
		cancel()
		if err == nil {
			t.Errorf("%s: registered", tc.name)
			reg.Deregister(context.Background())
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
		cli.Close()
	}
	if _, err := etcd.TLSFiles(s.CA, s.ClientCert, ""); err == nil {
		t.Error("TLSFiles took a certificate without its key")
	}
	if _, err := etcd.Connect(etcd.Config{Endpoints: []string{s.Endpoint}, Username: s.User}); err == nil {
		t.Error("Connect took a user without a password")
	}
}
