package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// topicTokens writes a token file for the cast: alice reads orders,
// bob is an admin, wendy writes orders.
func topicTokens(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(p, []byte("tokA alice reader\ntokB bob admin\ntokW wendy writer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// topicFlag is the cast's rules, as -auth-topics takes them.
const topicFlag = "pub:orders.>=writer|admin; sub:orders.>=reader|admin; deny-sub:orders.internal.>=reader; " +
	"pub:secrets.>=admin; sub:secrets.>=admin"

// TestServeTopicsUsage: rules for roles with no way to authenticate are a
// usage error; rules for every connection ("*") need none.
func TestServeTopicsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "-addr", "127.0.0.1:0", "-auth-topics", "pub:orders.>=writer"},
		{"serve", "-addr", "127.0.0.1:0", "-auth-topics", "pub:orders.>"},
	} {
		var stdout, stderr bytes.Buffer
		c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, environ: func() []string { return nil }}
		if code := c.run(args); code != exitUsage {
			t.Errorf("%q: exit status %d, want %d; stderr %s", args, code, exitUsage, stderr.String())
		}
	}
}

// TestProcessTopicPermissions: the issue, as a new user would try it, with
// the real binary: alice, a reader, cannot read bob's secrets.payroll nor
// subscribe to ">" nor publish; bob's message reaches bob's subscriber;
// wendy's order reaches alice.
func TestProcessTopicPermissions(t *testing.T) {
	d := startServe(t, "-auth-tokens", topicTokens(t), "-auth-topics", topicFlag)
	if !strings.Contains(d.log.String(), "topics=true") {
		t.Errorf("the serving line does not say topic permissions are on:\n%s", d.log.String())
	}
	checkTopicProcesses(t, []string{"-addr", d.addr})
}

// checkTopicProcesses runs rpcd sub and pub, with the dial flags given,
// against a server with topicFlag's rules and topicTokens' identities.
func checkTopicProcesses(t *testing.T, dialArgs []string) {
	t.Helper()
	as := func(cmd, token string, args ...string) []string {
		return append(append(append([]string{cmd}, dialArgs...), "-timeout", "5s", "-token", token), args...)
	}
	for _, pattern := range []string{"secrets.>", ">", "orders.>"} {
		r := rpcd(t, "", as("sub", "tokA", "-n", "1", pattern)...)
		if r.code != 1 || !strings.Contains(r.stderr, "rpcd: permission denied") || !strings.Contains(r.stderr, "alice may not subscribe to "+pattern) {
			t.Errorf("alice's sub %s: exit %d, stderr %q", pattern, r.code, r.stderr)
		}
	}
	bobOut, bobErrs, bobDone := startSub(t, as("sub", "tokB", "-n", "1", "secrets.>")[1:]...) // startSub says "sub"
	aliceOut, aliceErrs, aliceDone := startSub(t, as("sub", "tokA", "-n", "1", "orders.eu.>")[1:]...)

	r := rpcd(t, "", as("pub", "tokA", "secrets.payroll", `"salary 0"`)...)
	if r.code != 1 || !strings.Contains(r.stderr, "rpcd: permission denied: alice may not publish to secrets.payroll") {
		t.Errorf("alice's pub: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, p := range [][]string{
		as("pub", "tokB", "secrets.payroll", `"salary 1M"`),
		as("pub", "tokW", "orders.eu.created", `{"id":42}`),
	} {
		if r := rpcd(t, "", p...); r.code != 0 {
			t.Fatalf("rpcd %q: exit %d\n%s", p, r.code, r.stderr)
		}
	}
	for _, s := range []struct {
		who  string
		out  *bytes.Buffer
		errs *syncBuffer
		done <-chan error
		want string
	}{
		{"bob", bobOut, bobErrs, bobDone, "secrets.payroll \"salary 1M\"\n"},
		{"alice", aliceOut, aliceErrs, aliceDone, "orders.eu.created {\"id\":42}\n"},
	} {
		select {
		case err := <-s.done:
			if err != nil {
				t.Fatalf("%s's sub: %v\n%s", s.who, err, s.errs.String())
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s's sub did not exit after its message; stdout:\n%s", s.who, s.out.String())
		}
		if s.out.String() != s.want {
			t.Errorf("%s's sub printed %q, want %q", s.who, s.out.String(), s.want)
		}
	}
}

// TestProcessTopicPermissionsTLS: the same rules, over the TLS transport.
func TestProcessTopicPermissionsTLS(t *testing.T) {
	f := writeTestFiles(t)
	d := startServe(t, "-tls-cert", f.serverCert, "-tls-key", f.serverKey, "-auth-tokens", topicTokens(t), "-auth-topics", topicFlag)
	checkTopicProcesses(t, []string{"-addr", d.addr, "-tls-ca", f.ca})
}

// TestProcessTopicsConfig: the configuration file takes the same rules,
// one a line in a YAML block, as -auth-topics does.
func TestProcessTopicsConfig(t *testing.T) {
	file := writeConfig(t, fmt.Sprintf(`auth-tokens: %s
auth-topics: |
  pub:orders.>=writer
  sub:orders.>=reader|admin
  deny-sub:orders.internal.>=reader
  pub:secrets.>=admin
  sub:secrets.>=admin
`, topicTokens(t)))
	d := startServe(t, "-config", file)
	r := rpcd(t, "", "pub", "-addr", d.addr, "-token", "tokA", "orders.eu.created", "1")
	if r.code != 1 || !strings.Contains(r.stderr, "alice may not publish to orders.eu.created") {
		t.Errorf("alice's pub: exit %d, stderr %q", r.code, r.stderr)
	}
	r = rpcd(t, "", "sub", "-addr", d.addr, "-token", "tokA", "-n", "1", "orders.*.created")
	if r.code != 1 || !strings.Contains(r.stderr, "alice may not subscribe to orders.*.created") {
		t.Errorf("alice's sub to a pattern that reaches orders.internal.created: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := rpcd(t, "", "pub", "-addr", d.addr, "-token", "tokW", "orders.eu.created", "1"); r.code != 0 {
		t.Errorf("wendy's pub: exit %d, stderr %q", r.code, r.stderr)
	}
	bad := writeConfig(t, "addr: 127.0.0.1:0\nauth-topics: \"pub:orders..x=*\"\n")
	if r := rpcd(t, "", "serve", "-config", bad); r.code != exitUsage || !strings.Contains(r.stderr, "empty token in pattern") {
		t.Errorf("a bad rule in the file: exit %d, stderr %q", r.code, r.stderr)
	}
}
