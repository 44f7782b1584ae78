package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rpcd/rpcd/internal/leaktest"
)

// rpcdBin is the rpcd binary built by TestMain.
var rpcdBin string

// Bounds on the waits of the tests, generous for a loaded CI machine.
const (
	buildTimeout = 10 * time.Minute // with a cold cache, under go test -race ./... on 2 cores: the etcd client and gRPC took past 3 minutes
	runTimeout   = 20 * time.Second // one rpcd process that should end by itself
	startTimeout = 10 * time.Second // serve logging "rpcd: serving"
	stopTimeout  = 10 * time.Second // serve exiting after a signal
)

// TestMain builds rpcd once for the tests that run it as a process, and
// checks for goroutines leaked in this process (subprocesses are ended by
// each test's cleanup).
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rpcd-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rpcdBin = filepath.Join(dir, "rpcd")
	if runtime.GOOS == "windows" {
		rpcdBin += ".exe"
	}
	if err := build(rpcdBin); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	leaktest.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// build compiles this package into out. go test puts its own go command
// first on PATH.
func build(out string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("building rpcd: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", out, ".")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building rpcd: %v\n%s", err, b)
	}
	return nil
}

// result is what a finished rpcd process left.
type result struct {
	stdout, stderr string
	code           int
}

// rpcd runs the binary with args and stdin to its end.
func rpcd(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return rpcdEnv(t, nil, stdin, args...)
}

// rpcdEnv is rpcd with env added to the test's environment.
func rpcdEnv(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, rpcdBin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("rpcd %q did not end within %v; stderr:\n%s", args, runTimeout, stderr.String())
	}
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running rpcd %q: %v", args, err)
	}
	return result{stdout.String(), stderr.String(), code}
}

// daemon is an `rpcd serve` process.
type daemon struct {
	cmd    *exec.Cmd
	addr   string        // the bound address it logged
	log    syncBuffer    // its standard error
	exited chan struct{} // closed once it has exited and its stderr is read
	err    error         // Wait's result, once exited
}

// startServe starts `rpcd serve -addr 127.0.0.1:0 args...` and waits until
// it logs the address it listens on. The process is killed when the test
// ends if it still runs.
func startServe(t *testing.T, args ...string) *daemon {
	t.Helper()
	return startServeEnv(t, nil, args...)
}

// startServeEnv is startServe with env added to the test's environment.
func startServeEnv(t *testing.T, env []string, args ...string) *daemon {
	t.Helper()
	d := &daemon{exited: make(chan struct{})}
	d.cmd = exec.Command(rpcdBin, append([]string{"serve", "-addr", "127.0.0.1:0"}, args...)...)
	if env != nil {
		d.cmd.Env = append(os.Environ(), env...)
	}
	d.cmd.Stderr = &d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("starting rpcd serve: %v", err)
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-d.exited:
			return
		default:
		}
		_ = d.cmd.Process.Kill()
		select {
		case <-d.exited:
		case <-time.After(stopTimeout):
			t.Errorf("rpcd serve (pid %d) did not exit after SIGKILL", d.cmd.Process.Pid)
		}
	})
	addr, err := waitServing(&d.log, d.exited)
	if err != nil {
		t.Fatalf("rpcd serve: %v; log:\n%s", err, d.log.String())
	}
	d.addr = addr
	return d
}

// needSignals skips a test that signals another process to stop it
// gracefully: Windows sends another process no signal but a kill.
func needSignals(t *testing.T) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("Windows sends another process no signal but a kill")
	}
}

// stop sends sig and returns the exit status once the process has exited.
func (d *daemon) stop(t *testing.T, sig os.Signal) int {
	t.Helper()
	needSignals(t)
	if err := d.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signalling rpcd serve: %v", err)
	}
	select {
	case <-d.exited:
	case <-time.After(stopTimeout):
		t.Fatalf("rpcd serve did not exit within %v of %v; log:\n%s", stopTimeout, sig, d.log.String())
	}
	var ee *exec.ExitError
	switch {
	case d.err == nil:
		return 0
	case errors.As(d.err, &ee):
		return ee.ExitCode()
	}
	t.Fatalf("rpcd serve: %v", d.err)
	return -1
}

// waitServing polls log for the "rpcd: serving" line and returns its
// address. It fails when exited closes first or after startTimeout.
func waitServing(log *syncBuffer, exited <-chan struct{}) (string, error) {
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if addr := servingAddr(log.String()); addr != "" {
			return addr, nil
		}
		select {
		case <-exited:
			if addr := servingAddr(log.String()); addr != "" {
				return addr, nil
			}
			return "", errors.New("exited before serving")
		case <-deadline.C:
			return "", fmt.Errorf("no %q line within %v", "rpcd: serving", startTimeout)
		case <-tick.C:
		}
	}
}

var textAddr = regexp.MustCompile(` addr=(\S+)`)

// servingAddr finds the "rpcd: serving" line of a text or JSON log and
// returns its addr, or "" if there is none yet.
func servingAddr(log string) string {
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "rpcd: serving") {
			continue
		}
		var rec struct{ Msg, Addr string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "rpcd: serving" {
			return rec.Addr
		}
		if m := textAddr.FindStringSubmatch(line); m != nil {
			return m[1]
		}
	}
	return ""
}

// syncBuffer is a bytes.Buffer that one goroutine may write while another
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
