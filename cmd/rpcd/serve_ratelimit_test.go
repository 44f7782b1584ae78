package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
)

// TestServeRateLimit: with -rate-limit, a route takes its burst and then
// refuses calls with ResourceExhausted, unprocessed, on the main port and
// the gateway alike (429), while a route not listed is not limited; bad
// lists are refused with exit status 78.
func TestServeRateLimit(t *testing.T) {
	s := serveInProcessWith(t, nil, "-loops", "1", "-gateway", "127.0.0.1:0", "-rate-limit", "Math/Sum=0.001:2")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, s.addr, client.Options{MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var sum int
	for i := range 2 {
		if err := c.Call(ctx, builtin.Sum, builtin.SumArgs{A: 1, B: 2}, &sum); err != nil {
			t.Fatalf("call %d, within the burst: %v", i, err)
		}
	}
	err = c.Call(ctx, builtin.Sum, builtin.SumArgs{A: 1, B: 2}, &sum)
	if handler.CodeOf(err) != proto.CodeResourceExhausted || !handler.IsUnprocessed(err) {
		t.Fatalf("the third call: %v, want ResourceExhausted, unprocessed", err)
	}
	for range 10 {
		if err := c.Call(ctx, builtin.Routes, nil, nil); err != nil {
			t.Fatalf("a route not listed: %v", err)
		}
	}
	resp, err := http.Post("http://"+gatewayAddr(t, s.log.String())+"/rpc/Math/Sum", "application/json", strings.NewReader(`{"a":1,"b":2}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("the gateway past the limit: %s, want 429", resp.Status)
	}
	if st := s.stop(t); st != 0 {
		t.Errorf("exit status %d", st)
	}

	for _, list := range []string{"Math/Sum", "Math/Sum=0", "Math/Sum=x", "Math/Sum=1:0", "bad route=1", "*=1,*=2"} {
		if r := rpcd(t, "", "serve", "-addr", "127.0.0.1:0", "-rate-limit", list); r.code != exitUsage || !strings.Contains(r.stderr, "-rate-limit") {
			t.Errorf("-rate-limit %q: exit %d, %s", list, r.code, r.stderr)
		}
	}
}
