package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler/builtin"
)

// TestProcessHealth runs `rpcd health`, the container's health check,
// against `rpcd serve -admin`: 0 and "ready" while it serves, by -admin or
// by $RPCD_ADMIN bound to every interface; 1 once it drains (a stream holds
// the drain open) and when nothing listens.
func TestProcessHealth(t *testing.T) {
	needSignals(t)
	d := startServe(t, "-log-format", "json", "-admin", "127.0.0.1:0", "-drain-timeout", "5s")
	admin := adminAddr(t, d.log.String())
	_, port, _ := net.SplitHostPort(admin)

	if r := rpcd(t, "", "health", "-admin", admin); r.code != 0 || r.stdout != "ready\n" || r.stderr != "" {
		t.Errorf("health -admin %s: exit %d, stdout %q, stderr %q; want 0 and ready", admin, r.code, r.stdout, r.stderr)
	}
	if r := rpcdEnv(t, []string{"RPCD_ADMIN=0.0.0.0:" + port}, "", "health"); r.code != 0 || r.stdout != "ready\n" {
		t.Errorf("health with $RPCD_ADMIN=0.0.0.0:%s: exit %d, stdout %q, stderr %q", port, r.code, r.stdout, r.stderr)
	}
	if r := rpcd(t, "", "health", "-admin", "nonsense"); r.code != exitUsage || !strings.Contains(r.stderr, `the admin address is "nonsense", want host:port`) {
		t.Errorf("health -admin nonsense: exit %d, stderr %q", r.code, r.stderr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	c, err := client.Dial(ctx, d.addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.OpenStream(ctx, builtin.StreamSink)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("held open")); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(stopTimeout)
	for {
		r := rpcd(t, "", "health", "-admin", admin)
		if r.code == exitFail && strings.Contains(r.stderr, "rpcd: not ready: http://"+admin+"/readyz answered 503 Service Unavailable: draining") {
			break
		}
		if r.code != 0 || time.Now().After(deadline) {
			t.Fatalf("health while draining: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.CloseSend()
	select {
	case <-d.exited:
	case <-time.After(stopTimeout):
		t.Fatalf("rpcd serve did not exit; log:\n%s", d.log.String())
	}
	if r := rpcd(t, "", "health", "-admin", admin, "-timeout", "1s"); r.code != exitFail || !strings.Contains(r.stderr, "rpcd: not ready: ") {
		t.Errorf("health with nothing listening: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestDockerfileHealthcheck holds the Dockerfile's health check to what
// TestProcessHealth tries: the image sets $RPCD_ADMIN, exposes its port, and
// its HEALTHCHECK runs "rpcd health" with no shell, which then asks
// $RPCD_ADMIN. It runs the check's own command line against a server.
func TestDockerfileHealthcheck(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	var admin string
	var check []string
	var exposed []string
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "ENV" && strings.HasPrefix(f[1], "RPCD_ADMIN="):
			admin = strings.TrimPrefix(f[1], "RPCD_ADMIN=")
		case len(f) > 1 && f[0] == "EXPOSE":
			exposed = f[1:]
		case len(f) > 1 && f[0] == "HEALTHCHECK":
			_, cmd, ok := strings.Cut(line, " CMD ")
			if !ok || json.Unmarshal([]byte(strings.TrimSpace(cmd)), &check) != nil {
				t.Fatalf("HEALTHCHECK is not in exec form (the image has no shell): %q", line)
			}
		}
	}
	_, port, err := net.SplitHostPort(admin)
	if err != nil || !slices.Contains(exposed, port) {
		t.Fatalf("ENV RPCD_ADMIN=%q, EXPOSE %v: want an admin address whose port is exposed", admin, exposed)
	}
	if len(check) < 2 || check[0] != "/usr/local/bin/rpcd" || check[1] != "health" {
		t.Fatalf("HEALTHCHECK CMD %q, want /usr/local/bin/rpcd health", check)
	}
	d := startServe(t, "-log-format", "json", "-admin", "127.0.0.1:0")
	_, servedPort, _ := net.SplitHostPort(adminAddr(t, d.log.String()))
	host, _, _ := net.SplitHostPort(admin)
	r := rpcdEnv(t, []string{"RPCD_ADMIN=" + net.JoinHostPort(host, servedPort)}, "", check[1:]...)
	if r.code != 0 || r.stdout != "ready\n" {
		t.Errorf("the HEALTHCHECK's command: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
