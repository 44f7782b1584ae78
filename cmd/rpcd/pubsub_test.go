package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/load"
)

// startSub starts `rpcd sub` with args, the pattern last, and returns once it
// has subscribed: its output, its standard error, and its exit. The test
// kills it at its end if it is still running.
func startSub(t *testing.T, args ...string) (*bytes.Buffer, *syncBuffer, <-chan error) {
	t.Helper()
	sub := exec.Command(rpcdBin, append([]string{"sub"}, args...)...)
	out, errs := &bytes.Buffer{}, &syncBuffer{}
	sub.Stdout, sub.Stderr = out, errs
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sub.Wait() }()
	t.Cleanup(func() { sub.Process.Kill() })
	for i := 0; !strings.Contains(errs.String(), "sub: subscribed to "+args[len(args)-1]); i++ {
		if i == 1000 {
			t.Fatalf("sub did not subscribe; stderr:\n%s", errs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return out, errs, done
}

// TestProcessPubSub: `rpcd sub` prints what `rpcd pub` publishes to the
// topics its pattern matches, and exits after -n messages.
func TestProcessPubSub(t *testing.T) {
	d := startServe(t)
	out, errs, done := startSub(t, "-addr", d.addr, "-n", "2", "orders.>")
	for _, args := range [][]string{
		{"pub", "-addr", d.addr, "other.topic", `"not for sub"`},
		{"pub", "-addr", d.addr, "orders.eu.created", `{"id": 1}`},
		{"pub", "-addr", d.addr, "-raw", "orders.us", "plain bytes"},
	} {
		if r := rpcd(t, "", args...); r.code != 0 {
			t.Fatalf("rpcd %q: exit %d\n%s", args, r.code, r.stderr)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sub: %v\n%s", err, errs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("sub did not exit after 2 messages; stdout:\n%s", out.String())
	}
	if want := "orders.eu.created {\"id\": 1}\norders.us plain bytes\n"; out.String() != want {
		t.Fatalf("sub printed %q, want %q", out.String(), want)
	}
}

// TestProcessSubCompressed: `rpcd sub -compress zstd` prints a message
// that came compressed as it was published.
func TestProcessSubCompressed(t *testing.T) {
	d := startServe(t)
	out, errs, done := startSub(t, "-addr", d.addr, "-n", "1", "-compress", "zstd", "logs.>")
	line := strings.Repeat("GET /index.html 200; ", 200) // 4,200 bytes: compressed
	if r := rpcd(t, "", "pub", "-addr", d.addr, "-raw", "logs.web", line); r.code != 0 {
		t.Fatalf("pub: exit %d\n%s", r.code, r.stderr)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sub: %v\n%s", err, errs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("sub did not exit after its message; stdout:\n%s", out.String())
	}
	if want := "logs.web " + line + "\n"; out.String() != want {
		t.Fatalf("sub printed %d bytes, want the %d published", out.Len(), len(want))
	}
}

func TestPubSubUsage(t *testing.T) {
	for _, args := range [][]string{
		{"pub", "orders.*", "1"},
		{"pub", "orders", "not json"},
		{"pub", "orders"},
		{"sub", "orders..x"},
		{"sub", "-n", "-1", "orders"},
		{"sub", "-compress", "brotli", "orders"},
		{"sub"},
	} {
		if r := rpcd(t, "", args...); r.code != exitUsage {
			t.Errorf("rpcd %q: exit %d, want 78\n%s", args, r.code, r.stderr)
		}
	}
}

// TestProcessBenchFanOut: the FanOut scenario against its own child
// server: every message published reaches every subscriber.
func TestProcessBenchFanOut(t *testing.T) {
	r := rpcd(t, "", "bench", "-scenario", "FanOut", "-subs", "5", "-d", "300ms", "-warmup", "100ms", "-json")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var rep load.FanOutReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if rep.Published == 0 || rep.Delivered != 5*rep.Published || rep.Lost != 0 || rep.Subscribers != 5 || rep.P50us <= 0 {
		t.Fatalf("report %+v", rep)
	}
}
