package gateway

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
)

// benchWriter is a ResponseWriter that keeps nothing between requests but
// its header map, which it clears, as net/http's does.
type benchWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) WriteHeader(status int)      { w.status = status }
func (w *benchWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

// BenchmarkServeHTTP is the gateway's own part of a request, Math/Sum with
// a JSON body, without net/http's reading and writing of the connection.
func BenchmarkServeHTTP(b *testing.B) {
	reg := handler.NewRegistry()
	builtin.Register(reg)
	g := New(reg, Options{})
	body := []byte(`{"a":1,"b":2}`)
	r, err := http.NewRequest(http.MethodPost, "http://x/rpc/Math/Sum", nil)
	if err != nil {
		b.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.RemoteAddr = "127.0.0.1:40000"
	w := &benchWriter{h: http.Header{}}
	rd := bytes.NewReader(nil)
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		r.Body, r.ContentLength = readCloser{rd}, int64(len(body))
		clear(w.h)
		g.ServeHTTP(w, r)
		if w.status != http.StatusOK {
			b.Fatalf("status %d", w.status)
		}
	}
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }
