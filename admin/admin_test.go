package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rpcd/rpcd/admin"
	"github.com/rpcd/rpcd/auth"
	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/leaktest"
	"github.com/rpcd/rpcd/metrics"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	leaktest.VerifyTestMain(m)
}

// rig is a server with its calls counted, and its admin listener.
type rig struct {
	srv   *reactor.Server
	m     *metrics.Metrics
	h     *admin.Handler
	admin string // base URL of the admin listener

	observe atomic.Pointer[func(*http.Request)] // if set, sees each request to the admin listener
}

// newRig serves reg's routes, plus the built-in ones, counted by a
// metrics.Metrics, on loopback, with the admin handler on a listener of
// its own, as rpcd serve -admin does. Both stop when the test ends.
func newRig(t *testing.T, reg *handler.Registry) *rig {
	t.Helper()
	return newRigWith(t, reg, reactor.Options{})
}

// newRigWith is newRig with the server's options.
func newRigWith(t *testing.T, reg *handler.Registry, opts reactor.Options) *rig {
	t.Helper()
	return newRigAdmin(t, reg, opts, admin.Options{})
}

// newRigAdmin is newRigWith with the admin handler's options; their
// Metrics is the rig's.
func newRigAdmin(t *testing.T, reg *handler.Registry, opts reactor.Options, aopts admin.Options) *rig {
	t.Helper()
	r := &rig{m: metrics.New()}
	if reg == nil {
		reg = handler.NewRegistry()
	}
	reg.Use(r.m.Middleware())
	builtin.Register(reg)
	r.srv = reactor.New(reg, opts)
	if err := r.srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	aopts.Metrics = r.m
	r.h = admin.New(r.srv, aopts)
	t.Cleanup(func() { r.h.Close() })
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if see := r.observe.Load(); see != nil {
			(*see)(req)
		}
		r.h.ServeHTTP(w, req)
	}), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	t.Cleanup(func() {
		hs.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("admin Serve: %v", err)
		}
	})
	r.admin = "http://" + ln.Addr().String()
	return r
}

// dial returns a client of the rig's server that never retries, so that
// each call reaches the server exactly once.
func (r *rig) dial(t *testing.T) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, r.srv.Addr().String(), client.Options{MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var httpClient = &http.Client{
	Timeout:   30 * time.Second,
	Transport: &http.Transport{DisableKeepAlives: true}, // no idle connection outlives a test
}

// get fetches url and returns its status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := httpClient.Get(url)
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

// scrape fetches /metrics and returns every sample by its name and labels
// in Prometheus's notation, labels sorted: `rpcd_calls_total{code="OK",route="Math/Sum"}`.
// Histograms give their _count and _sum.
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	code, body := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(labels)
			key := name
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Untyped != nil:
				out[key] = m.Untyped.GetValue()
			case m.Histogram != nil:
				out[strings.Replace(key, name, name+"_count", 1)] = float64(m.Histogram.GetSampleCount())
				out[strings.Replace(key, name, name+"_sum", 1)] = m.Histogram.GetSampleSum()
			}
		}
	}
	return out
}

// testRoutes adds routes that fail with known codes.
func testRoutes() *handler.Registry {
	reg := handler.NewRegistry()
	reg.HandleFunc("Test/Denied", func(context.Context, []byte, []byte) ([]byte, error) {
		return nil, handler.Errorf(proto.CodePermissionDenied, "not you")
	})
	reg.HandleFunc("Test/Slow", func(_ context.Context, _, reply []byte) ([]byte, error) {
		time.Sleep(3 * time.Millisecond)
		return reply, nil
	}, handler.Blocking())
	return reg
}

// TestMetrics: after known calls (some failing with known codes, some
// refused before any handler), a scrape of /metrics over HTTP has exactly
// their counts, by route and code, and the server's and the runtime's
// metrics.
func TestMetrics(t *testing.T) {
	r := newRig(t, testRoutes())
	c := r.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const sums, badSums, denied, missing, slow = 20, 5, 4, 3, 6
	for i := range sums {
		var n int
		if err := c.Call(ctx, "Math/Sum", map[string]int{"a": i, "b": 1}, &n); err != nil || n != i+1 {
			t.Fatalf("Math/Sum: %d, %v", n, err)
		}
	}
	for range badSums {
		if err := c.Call(ctx, "Math/Sum", "seven", nil); !errors.Is(err, handler.ErrInvalidArgument) {
			t.Fatalf("Math/Sum with a bad argument: %v", err)
		}
	}
	for range denied {
		if _, err := c.CallRaw(ctx, "Test/Denied", nil, nil); !errors.Is(err, handler.ErrPermissionDenied) {
			t.Fatalf("Test/Denied: %v", err)
		}
	}
	for range missing {
		if _, err := c.CallRaw(ctx, "No/Such", nil, nil); !errors.Is(err, handler.ErrNotFound) {
			t.Fatalf("No/Such: %v", err)
		}
	}
	for range slow {
		if _, err := c.CallRaw(ctx, "Test/Slow", nil, nil); err != nil {
			t.Fatalf("Test/Slow: %v", err)
		}
	}

	got := scrape(t, r.admin)
	want := map[string]float64{
		`rpcd_calls_total{code="OK",route="Math/Sum"}`:                  sums,
		`rpcd_calls_total{code="InvalidArgument",route="Math/Sum"}`:     badSums,
		`rpcd_calls_total{code="OK",route="Test/Denied"}`:               0,
		`rpcd_calls_total{code="PermissionDenied",route="Test/Denied"}`: denied,
		`rpcd_calls_total{code="OK",route="Test/Slow"}`:                 slow,
		`rpcd_call_duration_seconds_count{route="Math/Sum"}`:            sums + badSums,
		`rpcd_call_duration_seconds_count{route="Test/Denied"}`:         denied,
		`rpcd_call_duration_seconds_count{route="Test/Slow"}`:           slow,
		`rpcd_calls_in_flight{route="Math/Sum"}`:                        0,
		`rpcd_calls_in_flight{route="Test/Slow"}`:                       0,
		`rpcd_errors_total{code="InvalidArgument"}`:                     badSums,
		`rpcd_errors_total{code="PermissionDenied"}`:                    denied,
		`rpcd_errors_total{code="NotFound"}`:                            missing,
		`rpcd_connections`:                                              1,
		`rpcd_connections_opened_total`:                                 1,
		`rpcd_connections_refused_total`:                                0,
		`rpcd_slow_consumers_total`:                                     0,
		`rpcd_connections_handed_off_total`:                             0,
		`rpcd_blocking_calls`:                                           0,
		`rpcd_draining`:                                                 0,
	}
	for key, w := range want {
		if v, ok := got[key]; !ok || v != w {
			t.Errorf("%s = %v (present: %v), want %v", key, v, ok, w)
		}
	}
	for key := range got {
		if strings.HasPrefix(key, "rpcd_") && strings.Contains(key, "No/Such") {
			t.Errorf("an unknown route has a series of its own: %s", key)
		}
	}
	if s := got[`rpcd_call_duration_seconds_sum{route="Test/Slow"}`]; s < slow*0.003 {
		t.Errorf("Test/Slow took %v s in all, want at least %v", s, slow*0.003)
	}
	// The byte counters agree with the server's own once its loop has
	// counted its last write, which it does after the write: a caller may
	// have its reply, and the test scrape, first.
	for try := 0; ; try++ {
		st := r.srv.Stats()
		in, out := got["rpcd_received_bytes_total"], got["rpcd_sent_bytes_total"]
		if in != 0 && out != 0 && in == float64(st.BytesIn) && out == float64(st.BytesOut) {
			break
		}
		if try == 50 {
			t.Errorf("bytes in %v out %v; the server says %d and %d", in, out, st.BytesIn, st.BytesOut)
			break
		}
		time.Sleep(20 * time.Millisecond)
		got = scrape(t, r.admin)
	}
	for _, key := range []string{"go_goroutines", "process_open_fds", "process_resident_memory_bytes"} {
		if _, ok := got[key]; !ok {
			t.Errorf("no %s: the Go and process collectors are missing", key)
		}
	}
}

// TestTopicRefusalMetrics: refusals of the server's topic permissions are
// in /metrics by kind and prefix, with no identity and no more of the
// topic than its first token.
func TestTopicRefusalMetrics(t *testing.T) {
	topics, err := auth.Topics(map[string]auth.TopicRules{
		"reader": {Subscribe: auth.TopicList{Allow: []string{"orders.>"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := newRigWith(t, nil, reactor.Options{
		Authenticator: auth.Tokens{"tokA": {Subject: "alice", Roles: []string{"reader"}}},
		Topics:        topics,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, r.srv.Addr().String(), client.Options{Credentials: &client.Credentials{Secret: []byte("tokA")}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, p := range []string{">", "secrets.payroll.2026"} {
		if _, err := c.Subscribe(ctx, p, make(chan client.Message, 1)); !errors.Is(err, handler.ErrPermissionDenied) {
			t.Fatalf("subscribing to %s: %v", p, err)
		}
	}
	for _, topic := range []string{"orders.eu", "orders.us", "made.up"} {
		if err := c.PublishRaw(ctx, topic, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(ctx); err != nil || c.RefusedPublishes() != 3 {
		t.Fatalf("flush: %v; %d refused", err, c.RefusedPublishes())
	}
	got := scrape(t, r.admin)
	want := map[string]float64{
		`rpcd_pubsub_refused_total{kind="subscribe",prefix=">"}`:     1,
		`rpcd_pubsub_refused_total{kind="subscribe",prefix="other"}`: 1,
		`rpcd_pubsub_refused_total{kind="publish",prefix="orders"}`:  2,
		`rpcd_pubsub_refused_total{kind="publish",prefix="other"}`:   1,
	}
	for key, w := range want {
		if v, ok := got[key]; !ok || v != w {
			t.Errorf("%s = %v (present: %v), want %v", key, v, ok, w)
		}
	}
	for key := range got {
		if strings.HasPrefix(key, "rpcd_pubsub_refused_total") && want[key] == 0 {
			t.Errorf("a series not asked for: %s", key)
		}
		if strings.Contains(key, "alice") || strings.Contains(key, "secrets") || strings.Contains(key, "made") {
			t.Errorf("a label carries an identity or a topic: %s", key)
		}
	}
}

// TestReadyzDraining: /readyz answers 200 while the server serves and 503
// from the moment Shutdown begins, while a call still holds the drain;
// /healthz stays 200 and /metrics says draining.
func TestReadyzDraining(t *testing.T) {
	reg := handler.NewRegistry()
	running, release := make(chan struct{}), make(chan struct{})
	reg.HandleFunc("Test/Block", func(_ context.Context, _, reply []byte) ([]byte, error) {
		close(running)
		<-release
		return append(reply, "done"...), nil
	}, handler.Blocking())
	r := newRig(t, reg)
	for _, path := range []string{"/readyz", "/healthz"} {
		if code, body := get(t, r.admin+path); code != http.StatusOK {
			t.Fatalf("%s before draining: %d %q", path, code, body)
		}
	}

	c := r.dial(t)
	reply := make(chan error, 1)
	go func() {
		b, err := c.CallRaw(context.Background(), "Test/Block", nil, nil)
		if err == nil && string(b) != "done" {
			err = fmt.Errorf("reply %q", b)
		}
		reply <- err
	}()
	<-running
	shutdown := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shutdown <- r.srv.Shutdown(ctx)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, body := get(t, r.admin+"/readyz")
		if code == http.StatusServiceUnavailable && body == "draining\n" {
			break
		}
		if code != http.StatusOK || time.Now().After(deadline) {
			t.Fatalf("/readyz once Shutdown began: %d %q", code, body)
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-shutdown:
		t.Fatalf("Shutdown returned (%v) while a call held the drain", err)
	default:
	}
	if code, _ := get(t, r.admin+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz while draining: %d", code)
	}
	if got := scrape(t, r.admin); got["rpcd_draining"] != 1 || got["rpcd_blocking_calls"] != 1 || got[`rpcd_calls_in_flight{route="Test/Block"}`] != 1 {
		t.Fatalf("while draining: rpcd_draining %v, rpcd_blocking_calls %v, in flight %v", got["rpcd_draining"], got["rpcd_blocking_calls"], got[`rpcd_calls_in_flight{route="Test/Block"}`])
	}
	close(release)
	if err := <-reply; err != nil {
		t.Fatalf("the call that held the drain: %v", err)
	}
	if err := <-shutdown; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if code, _ := get(t, r.admin+"/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz after Shutdown: %d", code)
	}
}

// TestPprof: the profiles answer on the admin mux.
func TestPprof(t *testing.T) {
	r := newRig(t, nil)
	for _, tc := range []struct{ path, want string }{
		{"/debug/pprof/", "goroutine"},
		{"/debug/pprof/goroutine?debug=1", "goroutine profile:"},
		{"/debug/pprof/heap?debug=1", "heap profile:"},
		{"/debug/pprof/cmdline", "admin.test"},
		{"/debug/pprof/symbol", "num_symbols:"},
	} {
		code, body := get(t, r.admin+tc.path)
		if code != http.StatusOK || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d, body without %q:\n%.300s", tc.path, code, tc.want, body)
		}
	}
	code, body := get(t, r.admin+"/debug/pprof/profile?seconds=1")
	if code != http.StatusOK || !strings.HasPrefix(body, "\x1f\x8b") {
		t.Errorf("CPU profile: %d, %d bytes, want a gzip'd profile", code, len(body))
	}
	if code, _ := get(t, r.admin+"/no/such"); code != http.StatusNotFound {
		t.Errorf("/no/such: %d, want 404", code)
	}
}

// stuckRoute registers Test/Stuck, an inline route that holds its event
// loop for hold, on reg.
func stuckRoute(reg *handler.Registry, hold time.Duration) {
	reg.HandleFunc("Test/Stuck", func(_ context.Context, _, reply []byte) ([]byte, error) {
		time.Sleep(hold)
		return reply, nil
	})
}

// overrun calls route once and waits until the watchdog has counted the
// server's nth overrun of it.
func (r *rig) overrun(t *testing.T, c *client.Client, route string, n uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.CallRaw(ctx, route, nil, nil); err != nil {
		t.Fatal(err)
	}
	for {
		for _, info := range r.srv.Routes() {
			if info.Name == route && info.Overruns >= n {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the watchdog has not counted overrun %d of %s", n, route)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestInlineOverruns: /metrics counts each inline route's overruns and
// says whether it moved to the blocking pool; /stats.json lists the routes
// with either, for the live page.
func TestInlineOverruns(t *testing.T) {
	reg := testRoutes()
	stuckRoute(reg, 60*time.Millisecond)
	r := newRigWith(t, reg, reactor.Options{InlineThreshold: 20 * time.Millisecond})
	c := r.dial(t)
	r.overrun(t, c, "Test/Stuck", 1)
	got := scrape(t, r.admin)
	for key, w := range map[string]float64{
		`rpcd_inline_overruns_total{route="Test/Stuck"}`: 1,
		`rpcd_inline_moved{route="Test/Stuck"}`:          0,
		`rpcd_inline_overruns_total{route="Math/Sum"}`:   0,
		`rpcd_inline_moved{route="Math/Sum"}`:            0,
	} {
		if v, ok := got[key]; !ok || v != w {
			t.Errorf("%s = %v (present: %v), want %v", key, v, ok, w)
		}
	}
	for key := range got {
		if strings.Contains(key, `route="Test/Slow"`) && strings.HasPrefix(key, "rpcd_inline") {
			t.Errorf("a route registered Blocking has an inline series: %s", key)
		}
	}

	// Seven more overruns: 8 of its last 16 timed runs over budget.
	for n := uint64(2); n <= 8; n++ {
		r.overrun(t, c, "Test/Stuck", n)
	}
	got = scrape(t, r.admin)
	if got[`rpcd_inline_overruns_total{route="Test/Stuck"}`] != 8 || got[`rpcd_inline_moved{route="Test/Stuck"}`] != 1 {
		t.Errorf("after 8 overruns: %v overruns, moved %v", got[`rpcd_inline_overruns_total{route="Test/Stuck"}`], got[`rpcd_inline_moved{route="Test/Stuck"}`])
	}
	var st admin.Stats
	code, body := get(t, r.admin+"/stats.json")
	if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil {
		t.Fatalf("/stats.json: %d %v\n%s", code, err, body)
	}
	if st.InlineOverruns != 8 || len(st.Inline) != 1 || st.Inline[0] != (admin.InlineStats{Route: "Test/Stuck", Overruns: 8, Moved: true}) {
		t.Fatalf("/stats.json: inline_overruns %d, inline %+v", st.InlineOverruns, st.Inline)
	}
}

// TestPageSelfContained: the live page loads nothing from elsewhere: its
// script and style are the admin listener's own, uPlot among them.
func TestPageSelfContained(t *testing.T) {
	r := newRig(t, nil)
	code, body := get(t, r.admin+"/")
	if code != http.StatusOK || !strings.Contains(body, "<title>rpcd</title>") {
		t.Fatalf("/: %d\n%.300s", code, body)
	}
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|@import|url\(`).FindString(body); m != "" {
		t.Fatalf("the page refers to another site: %q", m)
	}
	for _, want := range []string{`getJSON("stats.json")`, `"history.json"`, `src="uplot/uPlot.iife.min.js"`, `href="uplot/uPlot.min.css"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	for _, want := range []string{"st.inline_overruns", "st.inline", `id="inline-routes"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page does not show the watchdog's figures: no %s", want)
		}
	}
	for _, src := range regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(body, -1) {
		if code, _ := get(t, r.admin+"/"+src[1]); code != http.StatusOK {
			t.Errorf("the page refers to %s, which answers %d", src[1], code)
		}
	}
}

// TestUPlotVendored: the embedded uPlot is the release admin/uplot/README.md
// names, served with its type and an ETag of its version, and its script
// fetches nothing: the only address in it is the project's, in its
// banner.
func TestUPlotVendored(t *testing.T) {
	r := newRig(t, nil)
	resp, err := httpClient.Get(r.admin + "/uplot/uPlot.iife.min.js")
	if err != nil {
		t.Fatal(err)
	}
	js, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") {
		t.Fatalf("uPlot.iife.min.js: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	banner := "/*! https://github.com/leeoniya/uPlot (v" + admin.UPlotVersion + ") */"
	if !strings.HasPrefix(string(js), banner) {
		t.Errorf("the script begins %.60q, want %q", js, banner)
	}
	readme, err := os.ReadFile("uplot/README.md")
	if err != nil || !strings.Contains(string(readme), "| version | "+admin.UPlotVersion+" |") {
		t.Errorf("admin/uplot/README.md does not name version %s (%v)", admin.UPlotVersion, err)
	}
	rest := strings.TrimPrefix(string(js), banner)
	for _, bad := range []string{"http://", "https://", "fetch(", "XMLHttpRequest", "import(", "WebSocket", "sendBeacon"} {
		if strings.Contains(rest, bad) {
			t.Errorf("the script has %q", bad)
		}
	}
	for path, ct := range map[string]string{"/uplot/uPlot.min.css": "text/css", "/uplot/LICENSE": "text/plain"} {
		resp, err := httpClient.Get(r.admin + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), ct) || len(b) == 0 {
			t.Errorf("%s: %d %s, %d bytes", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(b))
		}
	}
	req, _ := http.NewRequest(http.MethodGet, r.admin+"/uplot/uPlot.iife.min.js", nil)
	req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
	again, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	again.Body.Close()
	if again.StatusCode != http.StatusNotModified || resp.Header.Get("ETag") != `"uplot-`+admin.UPlotVersion+`"` {
		t.Errorf("asked again with its ETag %s: %d, want 304", resp.Header.Get("ETag"), again.StatusCode)
	}
	if code, _ := get(t, r.admin+"/uplot/README.md"); code != http.StatusNotFound {
		t.Errorf("/uplot/README.md: %d, want 404 (not embedded)", code)
	}
}

// TestStatsJSON: /stats.json has the calls by route and all together, and
// rates and percentiles once calls have been made.
func TestStatsJSON(t *testing.T) {
	r := newRig(t, testRoutes())
	c := r.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range 30 {
		if _, err := c.CallRaw(ctx, builtin.EchoPacket, []byte("hi"), nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		c.CallRaw(ctx, "Test/Denied", nil, nil)
	}
	c.CallRaw(ctx, "No/Such", nil, nil)
	var st admin.Stats
	code, body := get(t, r.admin+"/stats.json")
	if code != http.StatusOK {
		t.Fatalf("/stats.json: %d %s", code, body)
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	if !st.Ready || st.Draining || st.Conns != 1 || st.Errors != 3 || st.ErrorsByCode["PermissionDenied"] != 2 || st.ErrorsByCode["NotFound"] != 1 {
		t.Fatalf("server figures: %s", body)
	}
	calls := st.Calls
	if calls == nil || calls.Calls != 32 || calls.Errors != 2 || calls.Count != 32 || calls.PerS <= 0 || calls.P50 <= 0 || calls.P99 < calls.P50 {
		t.Fatalf("all calls: %s", body)
	}
	var echo *admin.RouteStats
	for i := range calls.Routes {
		if calls.Routes[i].Route == builtin.EchoPacket {
			echo = &calls.Routes[i]
		}
	}
	if echo == nil || echo.Calls != 30 || echo.Errors != 0 || echo.P99 <= 0 {
		t.Fatalf("%s: %+v", builtin.EchoPacket, echo)
	}
	if st.RateWindow <= 0 || st.LatencyWindow < st.RateWindow {
		t.Fatalf("windows: rates %v s, latency %v s", st.RateWindow, st.LatencyWindow)
	}
}

// TestNoMetrics: without Options.Metrics the admin still serves the
// server's figures.
func TestNoMetrics(t *testing.T) {
	srv := reactor.New(handler.NewRegistry(), reactor.Options{})
	h := admin.New(srv, admin.Options{})
	defer h.Close()
	if srv.Ready() {
		t.Fatal("a server not started is ready")
	}
	st := h.Stats()
	if st.Calls != nil || st.Ready {
		t.Fatalf("stats without metrics, server not started: %+v", st)
	}
}

// TestConfigMetrics: with Options.Config, /metrics says the generation,
// the load time and the refused reloads as it says them at each scrape;
// without it, none of those series.
func TestConfigMetrics(t *testing.T) {
	var status atomic.Pointer[admin.ConfigStatus]
	loaded := time.Unix(1_800_000_000, 500_000_000)
	status.Store(&admin.ConfigStatus{Generation: 1, Loaded: loaded})
	r := newRigAdmin(t, nil, reactor.Options{}, admin.Options{Config: func() admin.ConfigStatus { return *status.Load() }})
	check := func(gen, failed float64, at time.Time) {
		t.Helper()
		got := scrape(t, r.admin)
		for key, want := range map[string]float64{
			"rpcd_config_generation":                  gen,
			"rpcd_config_last_load_timestamp_seconds": float64(at.UnixNano()) / 1e9,
			"rpcd_config_reloads_failed_total":        failed,
		} {
			if v, ok := got[key]; !ok || v != want {
				t.Errorf("%s = %v (present: %v), want %v", key, v, ok, want)
			}
		}
	}
	check(1, 0, loaded)
	later := loaded.Add(90 * time.Second)
	status.Store(&admin.ConfigStatus{Generation: 2, Loaded: later, Failed: 3})
	check(2, 3, later)

	plain := newRig(t, nil)
	for key := range scrape(t, plain.admin) {
		if strings.HasPrefix(key, "rpcd_config_") {
			t.Errorf("%s without Options.Config", key)
		}
	}
}
