package clientmetrics_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/leaktest"
	"github.com/rpcd/rpcd/internal/promtest"
	"github.com/rpcd/rpcd/metrics"
	"github.com/rpcd/rpcd/metrics/clientmetrics"
	"github.com/rpcd/rpcd/reactor"
)

// TestClientInterceptor: a client's metrics count each call it sends once,
// under its route and the code it ended with, calls an inner interceptor
// answers among them; exported as rpcd_client_calls_*, beside a server's
// rpcd_calls_* in one registry.
func TestClientInterceptor(t *testing.T) {
	server := metrics.New()
	reg := handler.NewRegistry()
	reg.Use(server.Middleware())
	reg.HandleFunc("T/Echo", func(_ context.Context, req, reply []byte) ([]byte, error) { return append(reply, req...), nil })
	s := reactor.New(reg, reactor.Options{Loops: 1})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())

	m := metrics.NewClient()
	cached := func(ctx context.Context, info *client.CallInfo, req, reply []byte, next client.Invoker) ([]byte, error) {
		if info.Route == "T/Cached" {
			return append(reply, "hit"...), nil
		}
		return next(ctx, req, reply)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, s.Addr().String(), client.Options{Interceptors: []client.Interceptor{clientmetrics.Interceptor(m), cached}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 3 {
		if _, err := c.CallRaw(ctx, "T/Echo", []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CallRaw(ctx, "T/None", nil, nil); handler.CodeOf(err) != handler.CodeOf(handler.ErrNotFound) {
		t.Fatalf("T/None: %v", err)
	}
	if _, err := c.CallRaw(ctx, "T/Cached", nil, nil); err != nil {
		t.Fatal(err)
	}

	got := promtest.Gather(t, server, m)
	for key, want := range map[string]float64{
		"rpcd_client_calls_total code=OK route=T/Echo":       3,
		"rpcd_client_calls_total code=NotFound route=T/None": 1,
		"rpcd_client_calls_total code=OK route=T/Cached":     1,
		"rpcd_client_call_duration_seconds route=T/Echo":     3,
		"rpcd_calls_total code=OK route=T/Echo":              3, // the server's
		"rpcd_client_calls_total code=OK route=T/None":       0,
		"rpcd_client_call_duration_seconds route=T/Cached":   1,
		"rpcd_client_call_duration_seconds route=T/None":     1,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", key, v, ok, want)
		}
	}
	for key := range got {
		if strings.HasPrefix(key, "rpcd_calls_total") && strings.Contains(key, "T/Cached") {
			t.Errorf("the server counted a call the client answered itself: %s", key)
		}
	}
}

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }
