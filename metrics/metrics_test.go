package metrics_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/internal/promtest"
	"github.com/rpcd/rpcd/metrics"
	"github.com/rpcd/rpcd/proto"
)

// serve calls route on reg as a transport does, and returns the code the
// caller would get.
func serve(t testing.TB, reg *handler.Registry, route string, req []byte) proto.Code {
	t.Helper()
	rt := reg.Lookup([]byte(route))
	if rt == nil {
		t.Fatalf("no route %s", route)
	}
	call := &handler.Call{Route: rt.Name()}
	call.Start(context.Background(), time.Time{})
	_, err := rt.Serve(call, req, make([]byte, 0, 64))
	call.End()
	return handler.CodeOf(err)
}

func byRoute(m *metrics.Metrics) map[string]metrics.RouteStats {
	out := map[string]metrics.RouteStats{}
	for _, s := range m.Snapshot() {
		out[s.Route] = s
	}
	return out
}

// TestMiddlewareCounts: every call is counted once, under its route and
// the code its caller gets, panics as Internal; a call is in flight while
// its handler runs; routes registered before and after Use, and a handler
// shared by two routes, are told apart.
func TestMiddlewareCounts(t *testing.T) {
	m := metrics.New()
	reg := handler.NewRegistry()
	reg.HandleFunc("T/Echo", func(_ context.Context, req, reply []byte) ([]byte, error) {
		return append(reply, req...), nil
	}) // before Use
	reg.Use(m.Middleware())
	reg.HandleFunc("T/Denied", func(context.Context, []byte, []byte) ([]byte, error) {
		return nil, handler.Errorf(proto.CodePermissionDenied, "no")
	})
	reg.HandleFunc("T/Plain", func(context.Context, []byte, []byte) ([]byte, error) {
		return nil, errors.New("no code")
	})
	reg.HandleFunc("T/Panic", func(context.Context, []byte, []byte) ([]byte, error) {
		panic("boom")
	})
	reg.HandleFunc("T/Custom", func(context.Context, []byte, []byte) ([]byte, error) {
		return nil, &handler.Error{Code: 1000}
	})
	var inFlight uint64
	reg.HandleFunc("T/Look", func(_ context.Context, _, reply []byte) ([]byte, error) {
		inFlight = byRoute(m)["T/Look"].InFlight
		return reply, nil
	})
	shared := handler.Chain(handler.HandlerFunc(func(_ context.Context, _, reply []byte) ([]byte, error) {
		time.Sleep(2 * time.Millisecond)
		return reply, nil
	}), m.Middleware()) // one wrapped handler, two routes of a registry without Use
	bare := handler.NewRegistry()
	bare.Handle("T/SharedA", shared)
	bare.Handle("T/SharedB", shared)

	calls := []struct {
		route string
		times int
		code  proto.Code
	}{
		{"T/Echo", 7, proto.CodeOK},
		{"T/Denied", 3, proto.CodePermissionDenied},
		{"T/Plain", 2, proto.CodeUnknown},
		{"T/Panic", 2, proto.CodeInternal},
		{"T/Custom", 1, 1000},
		{"T/Look", 1, proto.CodeOK},
		{"T/SharedA", 2, proto.CodeOK},
		{"T/SharedB", 1, proto.CodeOK},
		{"T/SharedA", 1, proto.CodeOK},
	}
	for _, c := range calls {
		on := reg
		if c.route == "T/SharedA" || c.route == "T/SharedB" {
			on = bare
		}
		for range c.times {
			if code := serve(t, on, c.route, []byte("x")); code != c.code {
				t.Fatalf("%s answered %v, want %v", c.route, code, c.code)
			}
		}
	}

	want := map[string]map[string]uint64{
		"T/Echo":    {"OK": 7},
		"T/Denied":  {"PermissionDenied": 3},
		"T/Plain":   {"Unknown": 2},
		"T/Panic":   {"Internal": 2},
		"T/Custom":  {"Other": 1},
		"T/Look":    {"OK": 1},
		"T/SharedA": {"OK": 3},
		"T/SharedB": {"OK": 1},
	}
	got := byRoute(m)
	if len(got) != len(want) {
		t.Fatalf("%d routes counted, want %d: %v", len(got), len(want), got)
	}
	for route, codes := range want {
		s := got[route]
		for slot, n := range s.Calls {
			if n != codes[metrics.CodeName(slot)] {
				t.Errorf("%s: %d calls with %s, want %d", route, n, metrics.CodeName(slot), codes[metrics.CodeName(slot)])
			}
		}
		if s.InFlight != 0 {
			t.Errorf("%s: %d in flight after the calls", route, s.InFlight)
		}
		if s.Latency.Count() != s.Total() {
			t.Errorf("%s: %d latencies for %d calls", route, s.Latency.Count(), s.Total())
		}
	}
	if inFlight != 1 {
		t.Errorf("in flight during the call: %d, want 1", inFlight)
	}
	if s := got["T/SharedA"]; s.Latency.Sum < 3*2*time.Millisecond || s.Latency.Quantile(0.5) < 2*time.Millisecond {
		t.Errorf("three calls of 2ms: sum %v, median %v", s.Latency.Sum, s.Latency.Quantile(0.5))
	}
	echo, denied := got["T/Echo"], got["T/Denied"]
	if echo.Errors() != 0 || denied.Errors() != 3 {
		t.Errorf("errors: T/Echo %d, T/Denied %d", echo.Errors(), denied.Errors())
	}

	// Use again: the routes are wrapped anew and keep counting where they were.
	reg.Use(func(next handler.Handler) handler.Handler { return next })
	serve(t, reg, "T/Denied", nil)
	if n := byRoute(m)["T/Denied"].Calls[transport.CodeSlot(proto.CodePermissionDenied)]; n != 4 {
		t.Fatalf("after Use: %d denied calls, want 4", n)
	}
}

// TestMiddlewareAllocs: counting a raw call allocates nothing, first call
// of the route aside.
func TestMiddlewareAllocs(t *testing.T) {
	m := metrics.New()
	reg := handler.NewRegistry()
	reg.Use(m.Middleware())
	reg.HandleFunc("T/Echo", func(_ context.Context, req, reply []byte) ([]byte, error) {
		return append(reply, req...), nil
	})
	rt := reg.Lookup([]byte("T/Echo"))
	call := &handler.Call{Route: rt.Name()}
	req, buf := make([]byte, 16), make([]byte, 0, 64)
	allocs := testing.AllocsPerRun(1000, func() {
		call.Start(context.Background(), time.Time{})
		if _, err := rt.Serve(call, req, buf); err != nil {
			t.Fatal(err)
		}
		call.End()
	})
	if allocs != 0 {
		t.Fatalf("%.2f allocations per counted call, want 0", allocs)
	}
	if s := byRoute(m)["T/Echo"]; s.Total() != 1001 {
		t.Fatalf("%d calls counted, want 1001", s.Total())
	}
}

// TestCollect: the collector's metrics pass the Prometheus registry's
// pedantic checks and carry the counts.
func TestCollect(t *testing.T) {
	m := metrics.New()
	reg := handler.NewRegistry()
	reg.Use(m.Middleware())
	reg.HandleFunc("T/Echo", func(_ context.Context, _, reply []byte) ([]byte, error) { return reply, nil })
	reg.HandleFunc("T/Fail", func(context.Context, []byte, []byte) ([]byte, error) {
		return nil, handler.ErrNotFound
	})
	for range 5 {
		serve(t, reg, "T/Echo", nil)
	}
	serve(t, reg, "T/Fail", nil)

	got := promtest.Gather(t, m)
	for key, want := range map[string]float64{
		"rpcd_calls_total code=OK route=T/Echo":       5,
		"rpcd_calls_total code=OK route=T/Fail":       0,
		"rpcd_calls_total code=NotFound route=T/Fail": 1,
		"rpcd_calls_in_flight route=T/Echo":           0,
		"rpcd_calls_in_flight route=T/Fail":           0,
		"rpcd_call_duration_seconds route=T/Echo":     5,
		"rpcd_call_duration_seconds route=T/Fail":     1,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", key, v, ok, want)
		}
	}
	if len(got) != 7 {
		t.Errorf("%d series, want 7: %v", len(got), got)
	}
}

// BenchmarkMiddleware is a raw call through Route.Serve with and without
// the metrics middleware: the difference is what counting costs a call.
//
//	go test -run '^$' -bench Middleware -count 6 ./metrics
func BenchmarkMiddleware(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "Off"
		if on {
			name = "On"
		}
		b.Run(name, func(b *testing.B) {
			reg := handler.NewRegistry()
			if on {
				reg.Use(metrics.New().Middleware())
			}
			reg.HandleFunc("T/Echo", func(_ context.Context, req, reply []byte) ([]byte, error) {
				return append(reply, req...), nil
			})
			rt := reg.Lookup([]byte("T/Echo"))
			call := &handler.Call{Route: rt.Name()}
			req, buf := make([]byte, 16), make([]byte, 0, 64)
			b.ReportAllocs()
			for b.Loop() {
				call.Start(context.Background(), time.Time{})
				if _, err := rt.Serve(call, req, buf); err != nil {
					b.Fatal(err)
				}
				call.End()
			}
		})
	}
}
