//go:build unix

package admin_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/reactor"
)

// browserTimeout bounds one headless browser run; a run takes about 2 s
// on the machine of docs/performance.md.
const browserTimeout = 90 * time.Second

// findChromium returns the headless browser to test the page with: $CHROMIUM,
// or Debian's chromium (apt-get install chromium), or Chrome.
func findChromium(t *testing.T) string {
	if bin := os.Getenv("CHROMIUM"); bin != "" {
		return bin
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if bin, err := exec.LookPath(name); err == nil {
			return bin
		}
	}
	t.Skip("no chromium on PATH (Debian: apt-get install chromium; or set CHROMIUM): the live page's browser test needs one")
	return ""
}

// dumpDOM loads url in headless chromium, lets the page run for a few
// seconds of the browser's virtual time (its refresh timer fires every
// second of it), and returns the document as the page left it.
func dumpDOM(t *testing.T, bin, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), browserTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--disable-extensions", "--user-data-dir="+t.TempDir(),
		"--virtual-time-budget=3000", "--dump-dom", url)
	// The browser starts processes of its own: end them all with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // any helper left behind
	if err != nil || !strings.Contains(stdout.String(), "</html>") {
		t.Fatalf("%s --dump-dom %s: %v after %v\nstdout:\n%.2000s\nstderr:\n%.4000s", bin, url, err, time.Since(start), stdout.String(), stderr.String())
	}
	t.Logf("the browser ran %v", time.Since(start).Round(time.Millisecond))
	return stdout.String()
}

// field returns the text of the element with id in dom.
func field(t *testing.T, dom, id string) string {
	t.Helper()
	m := regexp.MustCompile(`id="` + regexp.QuoteMeta(id) + `"[^>]*>([^<]*)<`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no element %q in the page:\n%s", id, dom)
	}
	return m[1]
}

// cell returns the text of the cell of class col in the row of route.
func cell(t *testing.T, dom, route, col string) string {
	t.Helper()
	m := regexp.MustCompile(`<tr data-route="` + regexp.QuoteMeta(route) + `">.*?<td class="` + col + `[^"]*">([^<]*)</td>`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no %s cell for %s in the page:\n%s", col, route, dom)
	}
	return m[1]
}

// number reads a count as the page writes it ("1,234").
func number(t *testing.T, s string) float64 {
	t.Helper()
	n, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	if err != nil {
		t.Fatalf("%q is not a number", s)
	}
	return n
}

// TestLivePageInBrowser loads the live page in a real headless browser: it
// shows the server's figures, and after more calls, the new ones.
func TestLivePageInBrowser(t *testing.T) {
	bin := findChromium(t)
	reg := testRoutes()
	stuckRoute(reg, 80*time.Millisecond)
	r := newRigWith(t, reg, reactor.Options{InlineThreshold: 20 * time.Millisecond})
	c := r.dial(t)
	r.overrun(t, c, "Test/Stuck", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	calls := func(n int) {
		for range n {
			if _, err := c.CallRaw(ctx, builtin.EchoPacket, []byte("ping"), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	calls(25)
	for range 2 {
		c.CallRaw(ctx, "Test/Denied", nil, nil)
	}

	dom := dumpDOM(t, bin, r.admin+"/")
	for id, want := range map[string]string{
		"status":       "serving",
		"addr":         r.srv.Addr().String(),
		"conns":        "1",
		"calls-total":  "28",
		"errors-total": "2",
		"in-flight":    "0",
		"slow":         "0",
		"overruns":     "1",
	} {
		if got := field(t, dom, id); got != want {
			t.Errorf("first load: #%s shows %q, want %q", id, got, want)
		}
	}
	for id, pattern := range map[string]string{
		"p50": `^[0-9.]+ (ns|µs|ms)$`, "p90": `^[0-9.]+ (ns|µs|ms)$`, "p99": `^[0-9.]+ (ns|µs|ms)$`,
		"calls-per-s": `^[0-9.,]+$`, "bytes-in-per-s": `^[0-9.]+ (B|KiB|MiB)/s$`,
	} {
		if got := field(t, dom, id); !regexp.MustCompile(pattern).MatchString(got) {
			t.Errorf("first load: #%s shows %q, want %s", id, got, pattern)
		}
	}
	if got := cell(t, dom, builtin.EchoPacket, "calls"); got != "25" {
		t.Errorf("first load: %s calls %q, want 25", builtin.EchoPacket, got)
	}
	if got := cell(t, dom, "Test/Denied", "errors"); got != "2" {
		t.Errorf("first load: Test/Denied errors %q, want 2", got)
	}
	if got := number(t, field(t, dom, "calls-per-s")); got <= 0 {
		t.Errorf("first load: #calls-per-s shows %v, want more than 0", got)
	}
	if m := regexp.MustCompile(`<tr data-inline-route="Test/Stuck"><td class="route">Test/Stuck</td><td class="overruns some">1</td><td class="where">event loop</td></tr>`).FindString(dom); m == "" {
		t.Error("first load: the table of inline overruns does not show Test/Stuck's")
	}
	if got := cell(t, dom, builtin.EchoPacket, "p99"); got == "–" {
		t.Errorf("first load: %s has no p99", builtin.EchoPacket)
	}
	if t.Failed() {
		t.Fatalf("the page as loaded:\n%s", dom)
	}

	calls(40)
	dom2 := dumpDOM(t, bin, r.admin+"/")
	if got := field(t, dom2, "calls-total"); got != "68" {
		t.Errorf("after 40 more calls: #calls-total shows %q, want 68", got)
	}
	if got := cell(t, dom2, builtin.EchoPacket, "calls"); got != "65" {
		t.Errorf("after 40 more calls: %s calls %q, want 65", builtin.EchoPacket, got)
	}
	if got := number(t, field(t, dom2, "calls-per-s")); got <= 0 {
		t.Errorf("after 40 more calls: #calls-per-s shows %v, want more than 0", got)
	}
	if t.Failed() {
		t.Fatalf("the page after more calls:\n%s", dom2)
	}
}
