package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// mdweExecEnv, set in the environment of this test binary, makes it a
// helper that runs the program the variable names (with the binary's
// arguments) under PR_SET_MDWE, as systemd 254 and later run a unit with
// MemoryDenyWriteExecute=yes on Linux 6.3 and later: no_new_privs, then
// PR_MDWE_REFUSE_EXEC_GAIN, which the program inherits across execve. It
// is no RPCD_ variable, which serve would warn about.
const mdweExecEnv = "RPCDTEST_MDWE_EXEC"

// mdweUnsupported is the helper's exit status when the kernel has no
// PR_SET_MDWE.
const mdweUnsupported = 97

const (
	prSetMDWE            = 65 // PR_SET_MDWE, <linux/prctl.h>
	prMDWERefuseExecGain = 1  // PR_MDWE_REFUSE_EXEC_GAIN
)

func init() {
	prog := os.Getenv(mdweExecEnv)
	if prog == "" {
		return
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "PR_SET_NO_NEW_PRIVS:", err)
		os.Exit(1)
	}
	if err := unix.Prctl(prSetMDWE, prMDWERefuseExecGain, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "PR_SET_MDWE:", err)
		if errors.Is(err, unix.EINVAL) {
			os.Exit(mdweUnsupported)
		}
		os.Exit(1)
	}
	env := slicesWithout(os.Environ(), mdweExecEnv+"="+prog)
	err := syscall.Exec(prog, append([]string{prog}, os.Args[1:]...), env)
	fmt.Fprintln(os.Stderr, "exec:", err)
	os.Exit(1)
}

func slicesWithout(list []string, drop string) []string {
	var out []string
	for _, s := range list {
		if s != drop {
			out = append(out, s)
		}
	}
	return out
}

// mdweCommand returns the command that runs rpcd with args under
// PR_SET_MDWE.
func mdweCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), mdweExecEnv+"="+rpcdBin)
	return cmd
}

// unitSetting returns the value dist/rpcd.service gives key in a line not
// commented out; "" if none.
func unitSetting(t *testing.T, key string) string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "dist", "rpcd.service"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	value := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), key+"="); ok {
			value = v
		}
	}
	return value
}

// TestMemoryDenyWriteExecute runs the rpcd binary under PR_SET_MDWE, the
// kernel rule systemd applies for MemoryDenyWriteExecute=yes, and holds
// dist/rpcd.service to what it finds. Today sonic (the JSON library) and
// its base64x load native code at init into memory they write and then
// make executable, which the rule refuses: rpcd panics before main (exit
// status 2, a Go panic's), so the unit must not ask for it, or it cannot
// start rpcd. If rpcd ever starts under the rule, the test makes sure it
// serves a typed call (sonic's codecs) and asks for the setting back.
func TestMemoryDenyWriteExecute(t *testing.T) {
	unitMDWE := unitSetting(t, "MemoryDenyWriteExecute")
	help, err := mdweCommand("help").CombinedOutput()
	var ee *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	switch {
	case code == mdweUnsupported:
		t.Skipf("this kernel has no PR_SET_MDWE (Linux 6.3 and later): %s", strings.TrimSpace(string(help)))
	case code == 0:
		d := &daemon{exited: make(chan struct{})}
		d.cmd = mdweCommand("serve", "-addr", "127.0.0.1:0")
		d.cmd.Stderr = &d.log
		if err := d.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { d.err = d.cmd.Wait(); close(d.exited) }()
		defer func() { _ = d.cmd.Process.Kill(); <-d.exited }()
		addr, err := waitServing(&d.log, d.exited)
		if err != nil {
			t.Fatalf("rpcd help runs under PR_SET_MDWE, but rpcd serve does not: %v; log:\n%s", err, d.log.String())
		}
		if r := rpcd(t, "", "call", "-addr", addr, "Math/Sum", `{"a":1,"b":2}`); r.code != 0 || r.stdout != "3\n" {
			t.Fatalf("a typed call to rpcd serve under PR_SET_MDWE: exit %d, %q, %q; log:\n%s", r.code, r.stdout, r.stderr, d.log.String())
		}
		if unitMDWE != "yes" {
			t.Errorf("rpcd serves under PR_SET_MDWE now: dist/rpcd.service can have MemoryDenyWriteExecute=yes back (and its comment go)")
		}
	case code == 2 && strings.Contains(string(help), "panic: permission denied"):
		if unitMDWE == "yes" {
			t.Errorf("dist/rpcd.service has MemoryDenyWriteExecute=yes, under which rpcd cannot start; under PR_SET_MDWE it exits %d:\n%s", code, help)
		} else {
			t.Logf("under PR_SET_MDWE rpcd panics at init (exit status 2), and dist/rpcd.service does not ask for it:\n%s", firstLines(string(help), 4))
		}
	default:
		t.Errorf("rpcd help under PR_SET_MDWE: exit status %d:\n%s", code, help)
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
