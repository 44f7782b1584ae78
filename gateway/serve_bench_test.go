package gateway

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
)

// sumRequest serves Math/Sum with a JSON body through a gateway, without
// net/http's reading and writing of the connection: the gateway's own part
// of a request.
type sumRequest struct {
	g    *Gateway
	r    *http.Request
	w    *recycledWriter
	body []byte
	rd   *bytes.Reader
}

func newSumRequest(tb testing.TB) *sumRequest {
	reg := handler.NewRegistry()
	builtin.Register(reg)
	r, err := http.NewRequest(http.MethodPost, "http://x/rpc/Math/Sum", nil)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background()) // as net/http's request context is
	tb.Cleanup(cancel)
	r = r.WithContext(ctx)
	r.Header.Set("Content-Type", ContentJSON)
	r.RemoteAddr = "127.0.0.1:40000"
	return &sumRequest{g: New(reg, Options{}), r: r, w: &recycledWriter{h: http.Header{}},
		body: []byte(`{"a":1,"b":2}`), rd: bytes.NewReader(nil)}
}

// serve runs one request and fails unless it answered 200 with 3.
func (s *sumRequest) serve(tb testing.TB) {
	s.rd.Reset(s.body)
	s.r.Body, s.r.ContentLength = nopCloser{s.rd}, int64(len(s.body))
	clear(s.w.h)
	s.w.body = s.w.body[:0]
	s.g.ServeHTTP(s.w, s.r)
	if s.w.status != http.StatusOK || string(s.w.body) != "3" {
		tb.Fatalf("status %d, body %q; want 200 and 3", s.w.status, s.w.body)
	}
}

// recycledWriter is a ResponseWriter whose header map and body are reused
// from one request to the next (net/http gives each response a new map,
// which is its cost, not the gateway's).
type recycledWriter struct {
	h      http.Header
	status int
	body   []byte
}

func (w *recycledWriter) Header() http.Header    { return w.h }
func (w *recycledWriter) WriteHeader(status int) { w.status = status }
func (w *recycledWriter) Write(p []byte) (int, error) {
	w.body = append(w.body, p...)
	return len(p), nil
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// TestServeHTTPAllocs bounds what a call through the gateway allocates
// beside net/http: the remote address (1 or 2). The Call is pooled; the
// watch that cancels it with the request is armed only for a handler that
// asks for Done (transport.CancelWhen), which Math/Sum does not; the reply
// headers, a small Content-Length among them, the Content-Type and the
// trace headers' lookup allocate nothing.
func TestServeHTTPAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	s := newSumRequest(t)
	if allocs := testing.AllocsPerRun(200, func() { s.serve(t) }); allocs > 2 {
		t.Fatalf("%.1f allocations per request, want at most 2", allocs)
	}
}

// BenchmarkServeHTTP is the gateway's own part of a request.
func BenchmarkServeHTTP(b *testing.B) {
	s := newSumRequest(b)
	b.ReportAllocs()
	for b.Loop() {
		s.serve(b)
	}
}
