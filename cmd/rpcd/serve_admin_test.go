package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/ws"
)

// adminAddr returns the address in serve's "rpcd: admin serving" line
// (JSON log).
func adminAddr(t *testing.T, log string) string {
	t.Helper()
	for _, line := range strings.Split(log, "\n") {
		var rec struct{ Msg, Admin string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "rpcd: admin serving" {
			return rec.Admin
		}
	}
	t.Fatalf("no admin line in the log:\n%s", log)
	return ""
}

// TestProcessServeAdmin runs `rpcd serve -admin -gateway`: health,
// readiness, the live page, its history and pprof answer; /metrics counts
// the calls made exactly, the gateway's responses by route and status
// (WebSocket upgrades among them) and its errors with the RPC port's, and
// says which build this is as `rpcd version` does; on SIGTERM the process
// drains and exits 0, and the admin listener is gone.
func TestProcessServeAdmin(t *testing.T) {
	d := startServe(t, "-log-format", "json", "-admin", "127.0.0.1:0", "-gateway", "127.0.0.1:0")
	base := "http://" + adminAddr(t, d.log.String())
	hc := &http.Client{Timeout: runTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := hc.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct{ path, want string }{
		{"/healthz", "ok\n"},
		{"/readyz", "ready\n"},
		{"/", "<title>rpcd</title>"},
		{"/debug/pprof/", "goroutine"},
		{"/stats.json", `"ready": true`},
		{"/history.json", `"interval_s":1,`},
		{"/uplot/uPlot.iife.min.js", "uPlot"},
	} {
		if code, body := get(tc.path); code != http.StatusOK || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d, body without %q:\n%.300s", tc.path, code, tc.want, body)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	c, err := client.Dial(ctx, d.addr, client.Options{MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	const sums, bad, missing = 12, 3, 2
	for i := range sums {
		var n int
		if err := c.Call(ctx, "Math/Sum", map[string]int{"a": i, "b": 1}, &n); err != nil {
			t.Fatal(err)
		}
	}
	for range bad {
		if err := c.Call(ctx, "Math/Sum", "seven", nil); !errors.Is(err, handler.ErrInvalidArgument) {
			t.Fatalf("a bad argument: %v", err)
		}
	}
	for range missing {
		if _, err := c.CallRaw(ctx, "No/Such", nil, nil); !errors.Is(err, handler.ErrNotFound) {
			t.Fatalf("no route: %v", err)
		}
	}

	// Through the gateway: a call, a bad argument, a path that names no
	// route, JSON-RPC with a failing call, and a WebSocket connection.
	gw := "http://" + gatewayAddr(t, d.log.String())
	for _, tc := range []struct {
		path, body string
		status     int
	}{
		{"/rpc/Math/Sum", `{"a":1,"b":2}`, 200},
		{"/rpc/Math/Sum", `"seven"`, 400},
		{"/nowhere", `{}`, 404},
		{"/jsonrpc", `{"jsonrpc":"2.0","method":"Math/Sum","params":["seven"],"id":1}`, 200},
	} {
		resp, err := hc.Post(gw+tc.path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Fatalf("POST %s: %d, want %d", tc.path, resp.StatusCode, tc.status)
		}
	}
	wsURL := "ws://" + strings.TrimPrefix(gw, "http://") + ws.Path
	wc, err := client.Dial(ctx, "ws", client.Options{MaxRetries: -1, Dial: func(ctx context.Context, _ string) (net.Conn, error) { return ws.Dial(ctx, wsURL, nil) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := wc.Call(ctx, "Math/Sum", map[string]int{"a": 1, "b": 1}, nil); err != nil {
		t.Fatalf("Math/Sum over WebSocket: %v", err)
	}
	defer wc.Close()

	code, body := get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		f := families[name]
	metrics:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue metrics
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
		t.Errorf("no %s%v in /metrics", name, labels)
		return -1
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		// TCP, then the gateway's call and the WebSocket's.
		{"rpcd_calls_total", map[string]string{"route": "Math/Sum", "code": "OK"}, sums + 1 + 1},
		// TCP, then the gateway's and JSON-RPC's bad arguments.
		{"rpcd_calls_total", map[string]string{"route": "Math/Sum", "code": "InvalidArgument"}, bad + 2},
		{"rpcd_call_duration_seconds", map[string]string{"route": "Math/Sum"}, sums + bad + 4},
		{"rpcd_errors_total", map[string]string{"code": "InvalidArgument"}, bad + 2},
		{"rpcd_errors_total", map[string]string{"code": "NotFound"}, missing},
		{"rpcd_gateway_responses_total", map[string]string{"route": "Math/Sum", "status": "200"}, 1},
		{"rpcd_gateway_responses_total", map[string]string{"route": "Math/Sum", "status": "400"}, 1},
		{"rpcd_gateway_responses_total", map[string]string{"route": "unknown", "status": "404"}, 1},
		{"rpcd_gateway_responses_total", map[string]string{"route": "jsonrpc", "status": "200"}, 1},
		{"rpcd_gateway_responses_total", map[string]string{"route": "ws", "status": "101"}, 1},
		{"rpcd_connections", nil, 2}, // TCP and WebSocket
		{"rpcd_draining", nil, 0},
	} {
		if got := value(tc.name, tc.labels); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	if got := value("process_open_fds", nil); got <= 0 {
		t.Errorf("process_open_fds = %v", got)
	}
	// rpcd_build_info has the labels rpcd version prints.
	v := rpcd(t, "", "version")
	var labels map[string]string
	if f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(v.stdout), "rpcd ")); len(f) == 3 {
		labels = map[string]string{}
		for _, kv := range f {
			k, val, _ := strings.Cut(kv, "=")
			labels[k] = val
		}
	}
	if labels == nil || value("rpcd_build_info", labels) != 1 {
		t.Errorf("rpcd_build_info does not have the labels of rpcd version's %q", v.stdout)
	}
	c.Close()

	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status %d after SIGTERM; log:\n%s", code, d.log.String())
	}
	if nc, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), time.Second); err == nil {
		nc.Close()
		t.Fatal("the admin listener still accepts after the process exited")
	}
}

// TestProcessServeAdminPortTaken: serve exits 1 when the admin address is
// in use, saying so.
func TestProcessServeAdminPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r := rpcd(t, "", "serve", "-addr", "127.0.0.1:0", "-admin", ln.Addr().String())
	if r.code != 1 || !strings.Contains(r.stderr, "rpcd: cannot listen") || !strings.Contains(r.stderr, "admin="+ln.Addr().String()) {
		t.Fatalf("exit status %d, stderr:\n%s", r.code, r.stderr)
	}
}
