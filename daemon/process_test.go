package daemon

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// processHelperEnv, set, makes this test binary TestProcessRestart's
// daemon (TestProcessHelper).
const processHelperEnv = "RPCD_TEST_PROCESS_HELPER"

// TestProcessHelper is the daemon of TestProcessRestart's processes when
// this test binary runs as one: it listens on the last -addr of its
// arguments, logs the address as Run does, and exits after waitTimeout if
// it is not killed first.
func TestProcessHelper(t *testing.T) {
	if os.Getenv(processHelperEnv) == "" {
		t.Skip("the daemon of TestProcessRestart, run by it")
	}
	fs := flag.NewFlagSet("helper", flag.ContinueOnError)
	addr := fs.String("addr", "", "")
	if err := fs.Parse(flag.Args()); err != nil {
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "level=INFO msg=\"rpcd: serving\" addr=%s args=%q\n", ln.Addr(), fs.Args())
	time.Sleep(waitTimeout)
	os.Exit(0)
}

// TestProcessRestart: a daemon started on port 0 and killed comes back at
// the address it served at, with its environment, and so does the one
// restarted from it.
func TestProcessRestart(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestProcessHelper$", "--", "-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), processHelperEnv+"=1")
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	p, err := StartProcess(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	addr := p.Addr()
	if _, port, _ := net.SplitHostPort(addr); port == "0" || port == "" {
		t.Fatalf("the daemon serves at %q, want a port picked", addr)
	}
	for i := range 2 {
		p.Signal(os.Kill)
		q, err := p.Restart(ctx)
		if err != nil {
			t.Fatalf("restart %d: %v", i+1, err)
		}
		p = q
		if p.Addr() != addr {
			t.Errorf("restart %d serves at %s, want %s", i+1, p.Addr(), addr)
		}
		if n := len(p.cmd.Args); n != len(cmd.Args)+2 {
			t.Errorf("restart %d has %d arguments, want %d: %q", i+1, n, len(cmd.Args)+2, p.cmd.Args)
		}
	}
	p.Signal(os.Kill)
}
