package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	rpcdaemon "github.com/rpcd/rpcd/daemon"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// TestRunUsage checks, in process, the command lines that end before
// anything is served or dialled.
func TestRunUsage(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string // substring
		wantStderr string // substring
	}{
		{"no args", nil, exitUsage, "", "usage: rpcd <command>"},
		{"-h", []string{"-h"}, 0, "usage: rpcd <command>", ""},
		{"--help", []string{"--help"}, 0, "usage: rpcd <command>", ""},
		{"help", []string{"help"}, 0, "call    call a route", ""},
		{"help lists describe", []string{"help"}, 0, "describe print what a server's routes take and answer", ""},
		{"help serve", []string{"help", "serve"}, 0, "-drain-timeout duration", ""},
		{"help unknown", []string{"help", "nope"}, exitUsage, "", `unknown command "nope"`},
		{"unknown command", []string{"nope"}, exitUsage, "", `rpcd: unknown command "nope"`},
		{"serve -h", []string{"serve", "-h"}, 0, "example:\n  rpcd serve -addr", ""},
		{"serve unknown flag", []string{"serve", "-port", "1"}, exitUsage, "", "rpcd serve: flag provided but not defined: -port"},
		{"serve argument", []string{"serve", "now"}, exitUsage, "", `unexpected argument "now"`},
		{"serve negative loops", []string{"serve", "-loops", "-1"}, exitUsage, "", "-loops is -1"},
		{"serve tiny frame", []string{"serve", "-max-frame", "8"}, exitUsage, "", "-max-frame is 8"},
		{"serve negative inflight", []string{"serve", "-max-inflight", "-3"}, exitUsage, "", "-max-inflight is -3"},
		{"serve zero drain", []string{"serve", "-drain-timeout", "0s"}, exitUsage, "", "-drain-timeout is 0s"},
		{"serve bad duration", []string{"serve", "-drain-timeout", "soon"}, exitUsage, "", "invalid value"},
		{"serve log level", []string{"serve", "-log-level", "loud"}, exitUsage, "", `-log-level is "loud"`},
		{"serve log format", []string{"serve", "-log-format", "xml"}, exitUsage, "", `-log-format is "xml"`},
		{"call -h", []string{"call", "-h"}, 0, "usage: rpcd call [flags] ROUTE [ARG]", ""},
		{"call no route", []string{"call"}, exitUsage, "", "want ROUTE and at most one ARG, got 0"},
		{"call too many", []string{"call", "A/B", "1", "2"}, exitUsage, "", "got 3 arguments"},
		{"call bad route", []string{"call", "A B"}, exitUsage, "", "want printable ASCII"},
		{"call bad json", []string{"call", "Math/Sum", "{a:1}"}, exitUsage, "", "ARG: not valid JSON: unexpected 'a' at byte 2, where a key belongs; use -raw"},
		{"call two json values", []string{"call", "Math/Sum", "1 2"}, exitUsage, "", "ARG: not valid JSON: unexpected '2' at byte 3, after the value"},
		{"call zero timeout", []string{"call", "-timeout", "0s", "Sys/Ping"}, exitUsage, "", "-timeout is 0s"},
		{"call meta no =", []string{"call", "-meta", "k", "Sys/Ping"}, exitUsage, "", `"k" is not key=value`},
		{"call meta empty key", []string{"call", "-meta", "=v", "Sys/Ping"}, exitUsage, "", "want 1 to 255"},
		{"call meta bad key", []string{"call", "-meta", "k\x01=v", "Sys/Ping"}, exitUsage, "", "is not printable ASCII"},
		{"call meta long key", []string{"call", "-meta", strings.Repeat("k", 256) + "=v", "Sys/Ping"}, exitUsage, "", "key of 256 bytes"},
		{"bench balance without a service", []string{"bench", "-balance", "least-inflight"}, exitUsage, "", "-balance and -hash-key go with a service -addr"},
		{"bench hash key without hash", []string{"bench", "-addr", "static://127.0.0.1:1/svc", "-hash-key", "k"}, exitUsage, "", "-hash-key goes with -balance hash"},
		{"bench replay and c", []string{"bench", "-replay", "r.rec", "-c", "4"}, exitUsage, "", "-c does not go with -replay"},
		{"bench speed without replay", []string{"bench", "-speed", "2"}, exitUsage, "", "-speed does not go without -replay"},
		{"bench replay zero speed", []string{"bench", "-replay", "r.rec", "-speed", "0"}, exitUsage, "", "-speed 0, -loop 1: want a speed above 0"},
		{"bench replay loop 0 without d", []string{"bench", "-replay", "r.rec", "-loop", "0"}, exitUsage, "", "-loop 0 (until -d) with -d"},
		{"routes -h", []string{"routes", "-h"}, 0, "rpcd routes -addr", ""},
		{"routes argument", []string{"routes", "extra"}, exitUsage, "", `unexpected argument "extra"`},
		{"routes zero timeout", []string{"routes", "-timeout", "-1s"}, exitUsage, "", "-timeout is -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, strings.NewReader(""), &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit status %d, want %d; stderr:\n%s", code, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout lacks %q:\n%s", tt.wantStdout, stdout.String())
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantStderr, stderr.String())
			}
			if tt.wantCode == 0 && stderr.Len() > 0 {
				t.Errorf("stderr %q, want none", stderr.String())
			}
			if tt.wantCode == exitUsage && stdout.Len() > 0 {
				t.Errorf("stdout %q on a usage error, want none", stdout.String())
			}
		})
	}
}

// spacedJSON is Test/Spaced's reply: JSON as no encoder would write it.
const spacedJSON = "{ \"a\" :  [1, 2.50],\n\t\"b\": \"\\u00e9\" }"

// testRoutes are added to the built-in routes by the in-process servers:
// Test/Meta returns the call's trace-id metadata; Test/Spaced returns
// spacedJSON; Test/Block is Blocking, tells entered it runs and returns when
// its context ends.
func testRoutes(entered chan<- struct{}) func(*handler.Registry) {
	return func(reg *handler.Registry) {
		reg.Handle("Test/Meta", handler.Func(func(ctx context.Context, _ struct{}) (string, error) {
			v, _ := handler.CallFrom(ctx).Metadata.Get("trace-id")
			return string(v), nil
		}))
		reg.HandleFunc("Test/Spaced", func(_ context.Context, _, reply []byte) ([]byte, error) {
			return append(reply, spacedJSON...), nil
		})
		reg.Handle("Test/Block", handler.Func(func(ctx context.Context, _ struct{}) (int, error) {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-ctx.Done()
			return 0, ctx.Err()
		}), handler.Blocking())
	}
}

// server is `rpcd serve` run in this process, stopped by signals sent on
// sigs.
type server struct {
	sigs chan os.Signal
	log  *syncBuffer
	code chan int // receives serve's exit status
	addr string
}

// serveInProcess runs serve with one event loop, args and the test routes
// until it logs its address. The test's cleanup stops it if it still runs.
func serveInProcess(t *testing.T, entered chan<- struct{}, args ...string) *server {
	t.Helper()
	return serveInProcessWith(t, testRoutes(entered), append([]string{"-loops", "1"}, args...)...)
}

// serveInProcessWith runs `serve -addr 127.0.0.1:0 -log-format json` with
// args, register adding routes if not nil, until it logs its address. The
// test's cleanup stops it if it still runs.
func serveInProcessWith(t *testing.T, register func(*handler.Registry), args ...string) *server {
	t.Helper()
	s := &server{sigs: make(chan os.Signal, 2), log: &syncBuffer{}, code: make(chan int, 1)}
	c := &cli{
		stdin:    strings.NewReader(""),
		stdout:   &bytes.Buffer{},
		stderr:   s.log,
		signals:  func() (<-chan os.Signal, func()) { return s.sigs, func() {} },
		register: register,
	}
	args = append([]string{"serve", "-addr", "127.0.0.1:0", "-log-format", "json"}, args...)
	exited := make(chan struct{})
	go func() {
		s.code <- c.run(args)
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
			return
		default:
		}
		s.sigs <- syscall.SIGTERM
		select {
		case <-exited:
		case <-time.After(stopTimeout):
			t.Errorf("in-process serve did not stop within %v of SIGTERM", stopTimeout)
		}
	})
	addr, err := waitServing(s.log, exited)
	if err != nil {
		t.Fatalf("serve: %v; log:\n%s", err, s.log.String())
	}
	s.addr = addr
	return s
}

// stop sends SIGTERM and returns serve's exit status once it has exited.
func (s *server) stop(t *testing.T) int {
	t.Helper()
	s.sigs <- syscall.SIGTERM
	return s.wait(t, stopTimeout)
}

// wait returns serve's exit status, failing the test if it takes longer
// than d.
func (s *server) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case code := <-s.code:
		return code
	case <-time.After(d):
		t.Fatalf("serve did not return within %v; log:\n%s", d, s.log.String())
		return -1
	}
}

// callInProcess runs `rpcd call` or `rpcd routes` in this process.
func callInProcess(args ...string) (stdout, stderr string, code int) {
	var o, e bytes.Buffer
	c := &cli{stdin: strings.NewReader(""), stdout: &o, stderr: &e}
	code = c.run(args)
	return o.String(), e.String(), code
}

func TestServeInProcess(t *testing.T) {
	s := serveInProcess(t, nil)

	if out, errOut, code := callInProcess("call", "-addr", s.addr, "-meta", "trace-id=abc123", "Test/Meta"); code != 0 || out != "\"abc123\"\n" {
		t.Errorf("call with -meta: exit status %d, stdout %q, stderr %q; want 0 and %q", code, out, errOut, "\"abc123\"\n")
	}
	if out, errOut, code := callInProcess("call", "-addr", s.addr, "Test/Spaced"); code != 0 || out != spacedJSON+"\n" {
		t.Errorf("call: exit status %d, stdout %q, stderr %q; want 0 and the reply verbatim, %q", code, out, errOut, spacedJSON+"\n")
	}
	if out, errOut, code := callInProcess("call", "-addr", s.addr, "-timeout", "200ms", "Test/Block"); code != 1 || !strings.Contains(errOut, "rpcd: deadline exceeded") {
		t.Errorf("call past its timeout: exit status %d, stdout %q, stderr %q; want 1 and a deadline error", code, out, errOut)
	}
	out, errOut, code := callInProcess("routes", "-addr", s.addr)
	if code != 0 || !strings.Contains(out, "\nTest/Block (blocking)\nTest/Meta\nTest/Spaced\n") {
		t.Errorf("routes: exit status %d, stdout %q, stderr %q; want Test/Block marked blocking", code, out, errOut)
	}

	s.sigs <- syscall.SIGTERM
	if code := s.wait(t, stopTimeout); code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0; log:\n%s", code, s.log.String())
	}
	transport := []string{`"transport":"epoll event loops"`, `"loops":1`} // the serving line names it
	switch runtime.GOOS {
	case "linux":
	case "windows":
		transport = []string{`"transport":"goroutine per connection"`}
	default:
		transport = []string{`"transport":"kqueue event loops"`, `"loops":1`}
	}
	for _, want := range append(transport, `"msg":"rpcd: serving"`, `"msg":"rpcd: draining"`, `"signal":"terminated"`, `"msg":"rpcd: stopped"`) {
		if !strings.Contains(s.log.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, s.log.String())
		}
	}
}

// blockingCall starts a Test/Block call and waits until its handler runs.
// The returned channel receives the call's error.
func blockingCall(t *testing.T, addr string, entered <-chan struct{}) <-chan error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	cl, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		defer cancel()
		defer cl.Close()
		errc <- cl.Call(ctx, "Test/Block", nil, nil)
	}()
	select {
	case <-entered:
	case err := <-errc:
		t.Fatalf("Test/Block returned before the signal: %v", err)
	case <-time.After(startTimeout):
		t.Fatal("Test/Block did not start")
	}
	return errc
}

// TestServeDrainTimeout checks that a call outlasting -drain-timeout makes
// serve exit 1 once the timeout passes.
func TestServeDrainTimeout(t *testing.T) {
	entered := make(chan struct{}, 1)
	s := serveInProcess(t, entered, "-drain-timeout", "300ms")
	errc := blockingCall(t, s.addr, entered)

	start := time.Now()
	s.sigs <- syscall.SIGTERM
	if code := s.wait(t, stopTimeout); code != 1 {
		t.Errorf("exit status %d after a drain timeout, want 1; log:\n%s", code, s.log.String())
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("serve returned %v after the signal, before the drain timeout", d)
	}
	if !strings.Contains(s.log.String(), "rpcd: drain timed out") {
		t.Errorf("log does not report the drain timeout:\n%s", s.log.String())
	}
	select {
	case err := <-errc:
		if err == nil {
			t.Error("the call cut short by the shutdown succeeded")
		}
	case <-time.After(stopTimeout):
		t.Fatal("the call in flight did not end after the shutdown")
	}
}

// TestServeSecondSignal checks that a second signal during a drain makes
// serve return at once with status 1, and that a signal repeated at once
// (as `timeout` repeats it) does not.
func TestServeSecondSignal(t *testing.T) {
	entered := make(chan struct{}, 1)
	s := serveInProcess(t, entered, "-drain-timeout", "1m")
	errc := blockingCall(t, s.addr, entered)

	s.sigs <- syscall.SIGTERM
	if err := waitLog(s.log, "rpcd: draining"); err != nil {
		t.Fatal(err)
	}
	s.sigs <- syscall.SIGTERM // as `timeout` sends it: to the child, then to its group
	time.Sleep(rpcdaemon.SameSignal + 100*time.Millisecond)
	if strings.Contains(s.log.String(), "rpcd: second signal") {
		t.Fatalf("the same signal twice at once was taken for a second one:\n%s", s.log.String())
	}
	s.sigs <- os.Interrupt
	if code := s.wait(t, 5*time.Second); code != 1 {
		t.Errorf("exit status %d after a second signal, want 1; log:\n%s", code, s.log.String())
	}
	if !strings.Contains(s.log.String(), "rpcd: second signal") {
		t.Errorf("log does not report the second signal:\n%s", s.log.String())
	}
	// Returning cut the drain short, which cancels the call in flight.
	select {
	case err := <-errc:
		if err == nil {
			t.Error("the call cut short by the shutdown succeeded")
		}
	case <-time.After(stopTimeout):
		t.Fatal("the call in flight did not end after serve returned")
	}
}

// waitLog waits up to startTimeout for log to contain s.
func waitLog(log *syncBuffer, s string) error {
	deadline := time.Now().Add(startTimeout)
	for !strings.Contains(log.String(), s) {
		if time.Now().After(deadline) {
			return fmt.Errorf("log lacks %q after %v:\n%s", s, startTimeout, log.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// TestCallStdinTooLarge checks that an ARG on standard input larger than
// any frame is refused before anything is dialled.
func TestCallStdinTooLarge(t *testing.T) {
	var stdout, stderr bytes.Buffer
	c := &cli{stdin: strings.NewReader(strings.Repeat("x", proto.DefaultMaxFrameSize+1)), stdout: &stdout, stderr: &stderr}
	code := c.run([]string{"call", "-raw", "-addr", "127.0.0.1:1", "Bench/EchoPacket", "-"})
	if code != 1 || !strings.Contains(stderr.String(), "exceeds the frame limit") {
		t.Errorf("exit status %d, stderr %q; want 1 and the frame limit named", code, stderr.String())
	}
}
