package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// writeConfig writes a configuration file for the test and returns its
// path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rpcd.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// environ returns env in os.Environ's form.
func environ(env map[string]string) []string {
	var kv []string
	for k, v := range env {
		kv = append(kv, k+"="+v)
	}
	return kv
}

// TestConfigServeRefuses runs serve in this process with values that parse
// but that serve refuses: exit status 78, the message naming where each
// came from.
func TestConfigServeRefuses(t *testing.T) {
	file := writeConfig(t, "addr: 127.0.0.1:0\nloops: -1\n")
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"from the file", nil, []string{"serve", "-config", file},
			"rpcd serve: -loops is -1, want 0 or more (-loops from " + file + ":2)"},
		{"from the environment", map[string]string{"RPCD_LOG_LEVEL": "loud"}, []string{"serve", "-config", file, "-loops", "1"},
			`rpcd serve: -log-level is "loud", want debug, info, warn or error (-log-level from $RPCD_LOG_LEVEL)`},
		{"bad key", nil, []string{"serve", "-config", writeConfig(t, "addr: 127.0.0.1:0\nlops: 1\n")},
			`rpcd.yaml:2: unknown key "lops"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr,
				environ: func() []string { return environ(tc.env) }}
			if code := c.run(tc.args); code != exitUsage {
				t.Errorf("exit status %d, want %d", code, exitUsage)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr %q, want it to contain %q", stderr.String(), tc.want)
			}
		})
	}
}

// TestProcessServeConfig runs `rpcd serve -config` as a process: the file
// sets the log format and the gateway, the environment overrides the
// file's log level, the command line the file's address; then a bad file
// stops it with exit status 78.
func TestProcessServeConfig(t *testing.T) {
	file := writeConfig(t, `addr: 127.0.0.1:1        # overridden by -addr
log-format: json
log-level: warn          # overridden by $RPCD_LOG_LEVEL
loops: 1
gateway: 127.0.0.1:0
drain-timeout: 5s
`)
	d := &daemon{exited: make(chan struct{})}
	d.cmd = exec.Command(rpcdBin, "serve", "-config", file, "-addr", "127.0.0.1:0")
	d.cmd.Env = append(os.Environ(), "RPCD_LOG_LEVEL=info")
	d.cmd.Stderr = &d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.err = d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
	})
	addr, err := waitServing(&d.log, d.exited)
	if err != nil {
		t.Fatalf("%v; log:\n%s", err, d.log.String())
	}
	if addr == "127.0.0.1:1" {
		t.Error("the file's addr won over -addr")
	}
	var gatewayAddr string
	for _, line := range strings.Split(d.log.String(), "\n") {
		var rec struct{ Msg, Gateway, Level string }
		if line == "" {
			continue
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q is not JSON (log-format: json in the file): %v", line, err)
		}
		if rec.Msg == "rpcd: gateway serving" {
			gatewayAddr = rec.Gateway
		}
	}
	if gatewayAddr == "" {
		t.Fatalf("no gateway (gateway: in the file; an info line, so $RPCD_LOG_LEVEL won over the file's warn):\n%s", d.log.String())
	}
	if r := rpcd(t, "", "call", "-addr", addr, "Math/Sum", `{"a":1,"b":2}`); r.code != 0 || r.stdout != "3\n" {
		t.Errorf("call: %+v", r)
	}
	hc := &http.Client{Timeout: runTimeout, Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Post("http://"+gatewayAddr+"/rpc/Math/Sum", "application/json", strings.NewReader(`{"a":2,"b":3}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "5" {
		t.Errorf("gateway: %d %q", resp.StatusCode, body)
	}
	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit status %d after SIGTERM; log:\n%s", code, d.log.String())
	}

	bad := writeConfig(t, "addr: 127.0.0.1:0\nmax-conns: lots\n")
	r := rpcd(t, "", "serve", "-config", bad)
	if want := bad + `:2: max-conns: want an integer, got the string "lots"`; r.code != exitUsage || !strings.Contains(r.stderr, want) {
		t.Errorf("bad file: exit status %d, stderr %q; want %d and %q", r.code, r.stderr, exitUsage, want)
	}
	r = rpcdEnv(t, []string{"RPCD_DRAIN_TIMEOUT=soon"}, "", "serve", "-addr", "127.0.0.1:0")
	if want := `$RPCD_DRAIN_TIMEOUT: invalid duration "soon"`; r.code != exitUsage || !strings.Contains(r.stderr, want) {
		t.Errorf("bad environment: exit status %d, stderr %q; want %d and %q", r.code, r.stderr, exitUsage, want)
	}
}

// TestConfigAllMistakes runs serve in this process with a file, an
// environment and a command line that hold a mistake of every kind: each
// is reported, in one run, with exit status 78, and the unknown variable is
// warned about.
func TestConfigAllMistakes(t *testing.T) {
	file := writeConfig(t, `addr: 127.0.0.1
max-conns: lots
loops: -1
max-conns: 5
lops: 1
drain-timeout: 10
`)
	env := map[string]string{"RPCD_LOG_LEVEL": "loud", "RPCD_MAX_CON": "5", "RPCD_TOKEN": "a client's"}
	var stdout, stderr bytes.Buffer
	c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, environ: func() []string { return environ(env) }}
	if code := c.run([]string{"serve", "-config", file, "-admin", "nonsense", "-rate-limit", "Math/Sum=0"}); code != exitUsage {
		t.Errorf("exit status %d, want %d", code, exitUsage)
	}
	want := []string{
		"rpcd serve: warning: $RPCD_MAX_CON is set, but rpcd has no such variable: it is ignored (did you mean $RPCD_MAX_CONNS?)",
		"rpcd serve: " + file + `:2: max-conns: want an integer, got the string "lots"`,
		"rpcd serve: " + file + `:4: key "max-conns" again (first on line 2)`,
		"rpcd serve: " + file + `:5: unknown key "lops": the keys are the flags of "rpcd serve -h", without the dash`,
		"rpcd serve: " + file + `:6: drain-timeout: invalid duration 10: want a string with a unit, such as "10s"`,
		"rpcd serve: -loops is -1, want 0 or more (-loops from " + file + ":3)",
		`rpcd serve: -addr is "127.0.0.1", want host:port (port 0 picks one) or unix:///path (-addr from ` + file + ":1)",
		`rpcd serve: -admin is "nonsense", want host:port (port 0 picks one)`,
		`rpcd serve: -rate-limit Math/Sum: rate "0", want calls a second above 0`,
		`rpcd serve: -log-level is "loud", want debug, info, warn or error (-log-level from $RPCD_LOG_LEVEL)`,
		"usage: rpcd serve [flags]",
	}
	got := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	for i, line := range want {
		if i >= len(got) || got[i] != line {
			t.Errorf("line %d of stderr:\n got %q\nwant %q", i+1, at(got, i), line)
		}
	}
	if strings.Contains(stderr.String(), "RPCD_TOKEN") {
		t.Errorf("$RPCD_TOKEN, the clients' variable, is warned about:\n%s", stderr.String())
	}
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(none)"
}
