//go:build unix

package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rpcd/rpcd/gateway"
)

// findChromium returns the headless browser to test with: $CHROMIUM, or
// Debian's chromium (apt-get install chromium), or Chrome; as
// admin.TestLivePageInBrowser finds it.
func findChromium(t *testing.T) string {
	if bin := os.Getenv("CHROMIUM"); bin != "" {
		return bin
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if bin, err := exec.LookPath(name); err == nil {
			return bin
		}
	}
	t.Skip("no chromium on PATH (Debian: apt-get install chromium; or set CHROMIUM): the CORS browser test needs one")
	return ""
}

// dumpDOM loads url in headless chromium, lets it run for a few seconds of
// the browser's virtual time (which waits for its requests), and returns
// the document as the page left it; as admin's browser test does.
func dumpDOM(t *testing.T, bin, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--disable-extensions", "--disable-background-networking", "--user-data-dir="+t.TempDir(),
		"--virtual-time-budget=5000", "--dump-dom", url)
	// The browser starts processes of its own: end them all with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // any helper left behind
	if err != nil || !strings.Contains(stdout.String(), "</html>") {
		t.Fatalf("%s --dump-dom %s: %v\nstdout:\n%.2000s\nstderr:\n%.4000s", bin, url, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// corsPage calls the gateway at gw from a page of another origin, as
// docs/gateway.md shows: a typed route at /rpc/, a JSON-RPC call, each
// with a header that needs a preflight (Content-Type: application/json,
// Rpcd-Timeout); it writes what became of each into #out as JSON.
const corsPage = `<!doctype html>
<meta charset="utf-8">
<title>CORS</title>
<pre id="out">running</pre>
<script>
const gw = %q;
async function attempt(name, path, body) {
  try {
    const resp = await fetch(gw + path, {
      method: 'POST',
      headers: {'Content-Type': 'application/json', 'Rpcd-Timeout': '5s'},
      body: JSON.stringify(body),
    });
    return {name, status: resp.status, body: await resp.text()};
  } catch (e) {
    return {name, error: String(e)};
  }
}
(async () => {
  const results = [
    await attempt('rpc', '/rpc/Math/Sum', {a: 1, b: 2}),
    await attempt('jsonrpc', '/jsonrpc', {jsonrpc: '2.0', method: 'Math/Sum', params: {a: 1, b: 2}, id: 1}),
  ];
  document.getElementById('out').textContent = JSON.stringify(results);
})();
</script>
`

// TestCORSInBrowser: a page on an origin the gateway lists calls /rpc/ and
// /jsonrpc from headless Chromium and reads the replies; the same page on
// an origin it does not list is refused by the browser (its preflight
// answered 403), and neither of its calls runs.
func TestCORSInBrowser(t *testing.T) {
	bin := findChromium(t)
	reg := testRegistry(t)
	var gwURL string // set before the pages serve
	page := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(strings.Replace(corsPage, "%q", strconvQuote(gwURL), 1)))
	})
	allowedPage := httptest.NewUnstartedServer(page)
	refusedPage := httptest.NewUnstartedServer(page)
	allowedOrigin := "http://" + allowedPage.Listener.Addr().String()
	g := gateway.New(reg, gateway.Options{CORS: gateway.CORS{Origins: []string{allowedOrigin}}})
	mux := http.NewServeMux()
	mux.Handle("/rpc/", g)
	mux.Handle(gateway.JSONRPCPath, g.JSONRPC())
	gwURL, _ = serve(t, mux)
	allowedPage.Start()
	refusedPage.Start()
	t.Cleanup(allowedPage.Close)
	t.Cleanup(refusedPage.Close)

	type result struct {
		Name, Body, Error string
		Status            int
	}
	results := func(url string) map[string]result {
		dom := dumpDOM(t, bin, url)
		m := regexp.MustCompile(`<pre id="out">([^<]*)</pre>`).FindStringSubmatch(dom)
		if m == nil {
			t.Fatalf("no results in the page:\n%s", dom)
		}
		var rs []result
		if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &rs); err != nil {
			t.Fatalf("the page's results %q: %v", m[1], err)
		}
		out := map[string]result{}
		for _, r := range rs {
			out[r.Name] = r
		}
		return out
	}

	got := results(allowedPage.URL)
	if r := got["rpc"]; r.Status != 200 || r.Body != "3" {
		t.Errorf("/rpc/Math/Sum from an allowed origin: %+v, want 200 3", r)
	}
	if r := got["jsonrpc"]; r.Status != 200 || !strings.Contains(r.Body, `"result":3`) {
		t.Errorf("/jsonrpc from an allowed origin: %+v, want 200 and result 3", r)
	}
	before := sumCalls(g)

	got = results(refusedPage.URL)
	for _, name := range []string{"rpc", "jsonrpc"} {
		if r := got[name]; r.Error == "" || r.Status != 0 {
			t.Errorf("%s from an origin not listed: %+v, want the browser to refuse it", name, r)
		}
	}
	if n := sumCalls(g); n != before {
		t.Errorf("the refused page's calls ran: Math/Sum answered %d times more", n-before)
	}
}

// sumCalls is how many 200s Math/Sum and JSON-RPC answered.
func sumCalls(g *gateway.Gateway) uint64 {
	var n uint64
	for _, rc := range g.Stats().Responses {
		if (rc.Route == "Math/Sum" || rc.Route == gateway.RouteJSONRPC) && rc.Status == 200 {
			n += rc.Count
		}
	}
	return n
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }
