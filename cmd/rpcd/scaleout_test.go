package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/etcdtest"
	"github.com/rpcd/rpcd/load"
)

// ledgerLines returns the keys in the chaos ledgers files, with how many
// times each was recorded, and the count per file.
func ledgerLines(t *testing.T, files ...string) (map[string]int, []int) {
	t.Helper()
	all := map[string]int{}
	per := make([]int, len(files))
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if line != "" {
				all[line]++
				per[i]++
			}
		}
	}
	return all, per
}

func nodeAddrs(k *client.Cluster) []string {
	var out []string
	for _, n := range k.Nodes() {
		out = append(out, n.Addr)
	}
	return out
}

// TestServeEtcdCluster: three `rpcd serve -etcd` processes register in a
// real etcd (embedded in this test); a client dials the service by name.
// Round robin spreads calls evenly (counted in each server's ledger). Under
// load from 16 callers of a route that is not idempotent, one node is
// killed with SIGKILL, a fourth starts, and another gets SIGTERM: it leaves
// etcd before it drains and exits 0. No call runs twice (the servers'
// ledgers), every call that succeeded ran once, and the only calls that
// fail are ones that were out on the killed node: Unavailable, at most one
// per caller.
func TestServeEtcdCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and four servers")
	}
	ep := etcdtest.Start(t)
	dir := t.TempDir()
	ledgers := make([]string, 4)
	nodes := make([]*daemon, 4)
	start := func(i int) {
		ledgers[i] = filepath.Join(dir, fmt.Sprintf("ledger%d", i))
		nodes[i] = startServe(t, "-etcd", ep, "-service", "ledger", "-etcd-ttl", "2s", "-loops", "1",
			"-meta", fmt.Sprintf("node=%d", i), "-zone", "z1", "-chaos-ledger", ledgers[i])
		if !strings.Contains(nodes[i].log.String(), "rpcd: registered") {
			t.Fatalf("node %d serves without saying it registered; log:\n%s", i, nodes[i].log.String())
		}
	}
	for i := range 3 {
		start(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	k, err := client.DialService(ctx, "etcd://"+ep+"/ledger", client.ServiceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if got := k.Nodes(); len(got) != 3 || got[0].Meta["node"] == "" || got[0].Meta[client.ZoneKey] != "z1" || len(got[0].Routes) == 0 {
		t.Fatalf("nodes %+v, want 3 with routes, metadata and zone z1", got)
	}

	for i := range 300 {
		if err := k.Call(ctx, load.ChaosRecord, nil, nil); err == nil {
			t.Fatal("a call without a key succeeded")
		}
		if _, err := k.CallRaw(ctx, load.ChaosRecord, []byte(fmt.Sprintf("rr-%d", i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	_, per := ledgerLines(t, ledgers[:3]...)
	for i, n := range per {
		if n != 100 {
			t.Errorf("round robin: node %d ran %d of 300 calls, want 100", i, n)
		}
	}

	// Load, then a kill, a node added and a drain.
	const nCallers = 16
	var (
		seq        atomic.Int64
		ok, failed atomic.Int64
		mu         sync.Mutex
		succeeded  = map[string]bool{}
		errs       []error
		stop       = make(chan struct{})
		wg         sync.WaitGroup
	)
	for range nCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("load-%d", seq.Add(1))
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := k.CallRaw(cctx, load.ChaosRecord, []byte(key), nil)
				cancel()
				mu.Lock()
				if err != nil {
					failed.Add(1)
					errs = append(errs, err)
				} else {
					ok.Add(1)
					succeeded[key] = true
				}
				mu.Unlock()
			}
		}()
	}
	progress := func(what string) {
		base := ok.Load()
		deadline := time.Now().Add(30 * time.Second)
		for ok.Load() < base+500 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no progress (%d calls succeeded, %d failed)", what, ok.Load(), failed.Load())
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("%s: %d calls succeeded, %d failed", what, ok.Load(), failed.Load())
	}
	waitNodes := func(what string, cond func([]string) bool) {
		deadline := time.Now().Add(30 * time.Second)
		for !cond(nodeAddrs(k)) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: nodes %v", what, nodeAddrs(k))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	progress("three nodes")
	_ = nodes[0].cmd.Process.Kill()
	<-nodes[0].exited
	progress("node 0 killed")
	waitNodes("node 0's lease expired", func(a []string) bool { return !contains(a, nodes[0].addr) })
	start(3)
	waitNodes("node 3 joined", func(a []string) bool { return contains(a, nodes[3].addr) })
	progress("node 3 joined")
	if code := nodes[1].stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("node 1 exited %d after SIGTERM; log:\n%s", code, nodes[1].log.String())
	}
	log1 := nodes[1].log.String()
	if d, s := strings.Index(log1, "rpcd: deregistered"), strings.Index(log1, "rpcd: stopped"); d < 0 || s < d {
		t.Errorf("node 1 did not leave etcd before it stopped; log:\n%s", log1)
	}
	progress("node 1 drained")
	close(stop)
	wg.Wait()

	runs, per := ledgerLines(t, ledgers...)
	t.Logf("calls run per node %v; %d succeeded, %d failed, %d sent again", per, ok.Load(), failed.Load(), k.Retries())
	if per[3] == 0 {
		t.Error("the node that joined ran no call")
	}
	for key, n := range runs {
		if n > 1 {
			t.Errorf("call %s ran %d times", key, n)
		}
	}
	for key := range succeeded {
		if runs[key] != 1 {
			t.Errorf("call %s succeeded but ran %d times", key, runs[key])
		}
	}
	if failed.Load() > nCallers {
		t.Errorf("%d calls failed, more than the %d callers could have had out on the killed node", failed.Load(), nCallers)
	}
	for _, err := range errs {
		var e *handler.Error
		if !errors.As(err, &e) || !errors.Is(err, handler.ErrUnavailable) || e.Unprocessed {
			t.Errorf("a failed call: %v (want Unavailable, not Unprocessed)", err)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestServeEtcdFlags: the flags that go with -etcd are refused without it,
// -etcd without -service, and bad values, with exit status 78.
func TestServeEtcdFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-service", "x"}, "go with -etcd"},
		{[]string{"-etcd", "127.0.0.1:1"}, "-etcd needs -service"},
		{[]string{"-etcd", "127.0.0.1:1", "-service", "a/b"}, "without slashes"},
		{[]string{"-etcd", "127.0.0.1:1", "-service", "a", "-weight", "0"}, "-weight is 0"},
		{[]string{"-etcd", "127.0.0.1:1", "-service", "a", "-meta", "novalue"}, "want key=value"},
		{[]string{"-zone", "a"}, "go with -etcd"},
		{[]string{"-etcd", "127.0.0.1:1", "-service", "a", "-zone", "a,b"}, "-zone is \"a,b\""},
		{[]string{"-etcd", "127.0.0.1:1", "-service", "a", "-zone", "a", "-meta", "zone=b"}, "-meta names a zone, and so does -zone"},
		{[]string{"-etcd-user", "u", "-etcd-password-file", "f"}, "go with -etcd"},
		{[]string{"-etcd", "127.0.0.1:1", "-service", "a", "-etcd-cert", "c.pem"}, "-etcd-cert and -etcd-key go together"},
		{[]string{"-etcd", "127.0.0.1:1", "-service", "a", "-etcd-user", "u"}, "-etcd-user and -etcd-password-file go together"},
	} {
		r := rpcd(t, "", append([]string{"serve", "-addr", "127.0.0.1:0"}, tc.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("serve %q: exit %d, stderr %q; want 78 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

// TestNoEtcdServerInBinary: rpcd links the etcd client only, never the
// server that the tests embed.
func TestNoEtcdServerInBinary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "go.etcd.io/etcd/server") || strings.HasPrefix(p, "go.etcd.io/raft") || strings.HasPrefix(p, "go.etcd.io/bbolt") {
			t.Fatalf("rpcd links %s", p)
		}
	}
}

// TestBenchService: rpcd bench -addr etcd://ENDPOINT/NAME loads every node
// of the service.
func TestBenchService(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and two servers")
	}
	ep := etcdtest.Start(t)
	dir := t.TempDir()
	ledgers := []string{filepath.Join(dir, "a"), filepath.Join(dir, "b")}
	for _, l := range ledgers {
		startServe(t, "-etcd", ep, "-service", "bench", "-loops", "1", "-chaos-ledger", l)
	}
	r := rpcd(t, "", "bench", "-addr", "etcd://"+ep+"/bench", "-route", load.ChaosRecord, "-size", "8",
		"-c", "2", "-inflight", "4", "-n", "2000", "-warmup", "0", "-json")
	if r.code != 0 {
		t.Fatalf("bench exited %d; stderr:\n%s", r.code, r.stderr)
	}
	var rep struct{ Calls, Errors int64 }
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.Calls != 2000 || rep.Errors != 0 {
		t.Fatalf("bench output (%v):\n%s", err, r.stdout)
	}
	_, per := ledgerLines(t, ledgers...)
	t.Logf("calls per node %v", per)
	for i, n := range per {
		if n < 500 {
			t.Errorf("node %d ran %d of 2000 calls", i, n)
		}
	}

	// -balance hash with one key: every call on one node.
	r = rpcd(t, "", "bench", "-addr", "etcd://"+ep+"/bench", "-route", load.ChaosRecord, "-size", "8",
		"-c", "2", "-inflight", "4", "-n", "1000", "-warmup", "0", "-json", "-balance", "hash", "-hash-key", "one-user")
	if r.code != 0 {
		t.Fatalf("bench -balance hash exited %d; stderr:\n%s", r.code, r.stderr)
	}
	_, after := ledgerLines(t, ledgers...)
	moved := []int{after[0] - per[0], after[1] - per[1]}
	t.Logf("-balance hash -hash-key one-user: calls per node %v", moved)
	if !slices.Equal(moved, []int{1000, 0}) && !slices.Equal(moved, []int{0, 1000}) {
		t.Errorf("-balance hash with one key: calls per node %v, want all 1000 on one", moved)
	}
}

// TestSecureEtcdProcesses: rpcd serve registers in an etcd that serves TLS
// only, asks for client certificates and has authentication on, given the
// -etcd-... flags, and rpcd bench reaches its nodes through it with the
// same flags; serve without the password refuses to start, and bench
// without TLS fails.
func TestSecureEtcdProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and a server")
	}
	s := etcdtest.StartSecure(t)
	pw := filepath.Join(t.TempDir(), "etcd-password")
	if err := os.WriteFile(pw, []byte(s.Password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	access := []string{"-etcd-cacert", s.CA, "-etcd-cert", s.ClientCert, "-etcd-key", s.ClientKey, "-etcd-user", s.User, "-etcd-password-file", pw}
	d := startServe(t, append([]string{"-etcd", s.Endpoint, "-service", "sec", "-loops", "1"}, access...)...)
	if !strings.Contains(d.log.String(), "rpcd: registered") {
		t.Errorf("serve did not say it registered:\n%s", d.log.String())
	}

	target := "etcd://" + s.Endpoint + "/sec"
	r := rpcd(t, "", append([]string{"bench", "-addr", target, "-n", "300", "-warmup", "0", "-json"}, access...)...)
	var rep struct{ Calls, Errors int64 }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rep) != nil || rep.Calls != 300 || rep.Errors != 0 {
		t.Fatalf("bench through the secured etcd: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := rpcd(t, "", append([]string{"call", "-addr", target}, append(access, "Math/Sum", `{"a":40,"b":2}`)...)...); r.code != 0 || r.stdout != "42\n" {
		t.Errorf("call through the secured etcd: exit %d, %q\n%s", r.code, r.stdout, r.stderr)
	}
	if r := rpcd(t, "", "bench", "-addr", target, "-n", "10", "-warmup", "0", "-timeout", "2s"); r.code == 0 {
		t.Errorf("bench reached a TLS-only etcd without TLS:\n%s", r.stderr)
	} else {
		t.Logf("bench without TLS: exit %d: %s", r.code, r.stderr)
	}
	if r := rpcd(t, "", "bench", "-addr", "127.0.0.1:1", "-etcd-user", "u", "-etcd-password-file", pw); r.code != exitUsage || !strings.Contains(r.stderr, "go with an etcd:// -addr") {
		t.Errorf("bench took -etcd-user with a plain address: exit %d, %s", r.code, r.stderr)
	}

	// A wrong password: serve logs why and exits.
	bad := filepath.Join(t.TempDir(), "wrong")
	if err := os.WriteFile(bad, []byte("not-it\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = rpcd(t, "", "serve", "-addr", "127.0.0.1:0", "-loops", "1", "-etcd", s.Endpoint, "-service", "sec",
		"-etcd-cacert", s.CA, "-etcd-cert", s.ClientCert, "-etcd-key", s.ClientKey, "-etcd-user", s.User, "-etcd-password-file", bad)
	if r.code == 0 || !strings.Contains(r.stderr, "cannot register in etcd") || !strings.Contains(r.stderr, "authentication failed") {
		t.Errorf("serve with a wrong etcd password: exit %d\n%s", r.code, r.stderr)
	}
}
