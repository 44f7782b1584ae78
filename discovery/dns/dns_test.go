package dns_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/discovery/dns"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/dnstest"
	"github.com/rpcd/rpcd/internal/leaktest"
	"github.com/rpcd/rpcd/reactor"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	// The Go resolver finishes an address lookup its caller gave up on (a
	// Watch stopped with its client), for other callers of the same name,
	// until its own timeout: goroutines of the standard library's, which
	// end by themselves, not this package's.
	leaktest.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("internal/singleflight.(*Group).doCall"),
		goleak.IgnoreAnyFunction("net.(*Resolver).lookupIPAddr.func2"),
		goleak.IgnoreAnyFunction("net.(*Resolver).goLookupIPCNAMEOrder.func3.1"))
}

func addrs(nodes []client.Node) string {
	var s []string
	for _, n := range nodes {
		s = append(s, n.Addr+"/"+strconv.Itoa(n.Weight))
	}
	return strings.Join(s, " ")
}

// TestLookup: a host:port is its A records on that port; a name alone is
// its SRV records of the lowest priority, each target's addresses on the
// record's port with its weight (scaled within client.MaxWeight);
// services that are neither are refused.
func TestLookup(t *testing.T) {
	z := dnstest.Start(t)
	z.SetA("svc.test.", "127.0.0.2", "127.0.0.1")
	z.SetA("a.test.", "127.0.1.1")
	z.SetA("b.test.", "127.0.1.2", "127.0.1.3")
	z.SetA("c.test.", "127.0.1.4")
	z.SetSRV("_rpcd._tcp.svc.test.", dnstest.SRV(10, 10, 7001, "a.test."), dnstest.SRV(10, 30, 7002, "b.test."), dnstest.SRV(20, 50, 7003, "c.test."), dnstest.SRV(10, 5, 7004, "gone.test."))
	z.SetSRV("_rpcd._tcp.heavy.test.", dnstest.SRV(0, 60000, 7001, "a.test."), dnstest.SRV(0, 6000, 7002, "c.test."), dnstest.SRV(0, 0, 7003, "c.test."))
	r := dns.New(dns.Config{Server: z.Addr()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct{ service, want string }{
		{"svc.test:7070", "127.0.0.1:7070/0 127.0.0.2:7070/0"},
		{"_rpcd._tcp.svc.test", "127.0.1.1:7001/10 127.0.1.2:7002/30 127.0.1.3:7002/30"}, // c has a lower priority, gone no address
		{"_rpcd._tcp.heavy.test", "127.0.1.1:7001/100 127.0.1.4:7002/10 127.0.1.4:7003/1"},
	} {
		nodes, err := r.Lookup(ctx, tc.service)
		if err != nil || addrs(nodes) != tc.want {
			t.Errorf("Lookup(%s) = %s, %v; want %s", tc.service, addrs(nodes), err, tc.want)
		}
	}
	for _, bad := range []string{"svc.test:0", "svc.test:http", ":7070", "", "a b", "x/y"} {
		if _, err := r.Lookup(ctx, bad); err == nil {
			t.Errorf("Lookup(%q) took it", bad)
		}
	}
	if _, err := r.Lookup(ctx, "nothing.test:7070"); err == nil {
		t.Error("Lookup of a name with no records succeeded")
	}
}

// TestDialService: a Cluster over dns spreads calls over the nodes a name's
// A records list, follows the records as they change, and keeps the last
// set while the name has none.
func TestDialService(t *testing.T) {
	port := twoServers(t)
	z := dnstest.Start(t)
	z.SetA("echo.test.", "127.0.0.1", "127.0.0.2")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := client.DialService(ctx, "echo.test:"+port, client.ServiceOptions{
		Resolver: dns.New(dns.Config{Server: z.Addr(), Refresh: 20 * time.Millisecond}),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// call makes n calls and counts them by the node that answered.
	call := func(n int) map[string]int {
		t.Helper()
		by := map[string]int{}
		for range n {
			who, err := cl.CallRaw(ctx, whoRoute, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			by[string(who)]++
		}
		return by
	}
	waitNodes(t, cl, 2)
	if by := call(100); by["127.0.0.1"] < 30 || by["127.0.0.2"] < 30 {
		t.Fatalf("100 calls over two nodes: %v", by)
	}

	z.SetA("echo.test.", "127.0.0.2")
	waitNodes(t, cl, 1)
	if by := call(50); by["127.0.0.2"] != 50 {
		t.Errorf("50 calls after the name dropped a node: %v", by)
	}

	z.SetA("echo.test.") // NXDOMAIN: the last set stays
	time.Sleep(100 * time.Millisecond)
	if by := call(10); by["127.0.0.2"] != 10 || len(cl.Nodes()) != 1 {
		t.Errorf("with no records: %v over %d nodes; want the last set's node", by, len(cl.Nodes()))
	}
}

// TestScheme: "dns://SERVER/host:port" targets resolve through the package's
// registered scheme.
func TestScheme(t *testing.T) {
	port := twoServers(t)
	z := dnstest.Start(t)
	z.SetA("one.test.", "127.0.0.2")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := client.DialService(ctx, "dns://"+z.Addr()+"/one.test:"+port, client.ServiceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if who, err := cl.CallRaw(ctx, whoRoute, nil, nil); err != nil || string(who) != "127.0.0.2" {
		t.Fatalf("a call through the scheme: answered by %q, %v; want 127.0.0.2", who, err)
	}
	if _, err := client.DialService(ctx, "dns:///bad:service:name", client.ServiceOptions{}); err == nil {
		t.Error("DialService took a malformed dns service")
	}
	// A name with no records: DialService gives up at its deadline and
	// says why.
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	_, err = client.DialService(short, "dns://"+z.Addr()+"/none.test:"+port, client.ServiceOptions{})
	if err == nil || !strings.Contains(err.Error(), "no such host") {
		t.Errorf("DialService of a name with no records: %v; want the lookup's error", err)
	}
}

// waitNodes waits until the cluster has n nodes.
func waitNodes(t *testing.T, cl *client.Cluster, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(cl.Nodes()) != n {
		if time.Now().After(deadline) {
			t.Fatalf("the cluster has %d nodes, want %d", len(cl.Nodes()), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// whoRoute answers with the address its server listens on, without port.
const whoRoute = "Node/Who"

// twoServers starts rpcd servers on 127.0.0.1 and 127.0.0.2 on one port,
// as the A records of a name with a port list them, and returns the port.
func twoServers(t *testing.T) string {
	t.Helper()
	for range 20 {
		s1 := start(t, "127.0.0.1", "0")
		_, port, _ := net.SplitHostPort(s1.Addr().String())
		if s2 := start(t, "127.0.0.2", port); s2 != nil {
			return port
		}
	}
	t.Fatal("no port free on both 127.0.0.1 and 127.0.0.2")
	return ""
}

// start serves whoRoute on host:port until the test ends; nil if it
// cannot listen there.
func start(t *testing.T, host, port string) *reactor.Server {
	reg := handler.NewRegistry()
	reg.HandleFunc(whoRoute, func(_ context.Context, _, reply []byte) ([]byte, error) {
		return append(reply, host...), nil
	})
	s := reactor.New(reg, reactor.Options{})
	if err := s.Start(net.JoinHostPort(host, port)); err != nil {
		return nil
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return s
}

// TestSchemeRefresh: a target's "?refresh=DURATION" is how often its name
// is looked up again: the cluster follows a change within a few of them,
// where the default (30 s) would not have looked yet; a malformed refresh
// is refused.
func TestSchemeRefresh(t *testing.T) {
	port := twoServers(t)
	z := dnstest.Start(t)
	z.SetA("moving.test.", "127.0.0.1")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := client.DialService(ctx, "dns://"+z.Addr()+"/moving.test:"+port+"?refresh=20ms", client.ServiceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	waitNodes(t, cl, 1)
	z.SetA("moving.test.", "127.0.0.1", "127.0.0.2")
	waitNodes(t, cl, 2) // within 10 s: at the default, not before 30 s
	for _, bad := range []string{"?refresh=0s", "?refresh=soon", "?every=5s", "?refresh"} {
		if _, err := client.DialService(ctx, "dns://"+z.Addr()+"/moving.test:"+port+bad, client.ServiceOptions{}); err == nil {
			t.Errorf("DialService took %q", bad)
		}
	}
	if nodes, err := dns.New(dns.Config{Server: z.Addr()}).Lookup(ctx, "moving.test:"+port+"?refresh=1m"); err != nil || len(nodes) != 2 {
		t.Errorf("Lookup with a refresh: %v, %v", nodes, err)
	}
}
