package ratelimit_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/ratelimit"
)

// registry serves routes a, b and c, each counting its calls, under the
// limits given.
func registry(limits map[string]ratelimit.Limit, ran map[string]int) *handler.Registry {
	reg := handler.NewRegistry()
	reg.Use(ratelimit.PerRoute(limits))
	for _, r := range []string{"T/A", "T/B", "T/C"} {
		reg.HandleFunc(r, func(_ context.Context, req, reply []byte) ([]byte, error) {
			ran[r]++
			return append(reply, req...), nil
		})
	}
	return reg
}

func call(reg *handler.Registry, route string) error {
	rt := reg.Lookup([]byte(route))
	_, err := rt.Serve(&handler.Call{Route: route, Codec: proto.CodecRaw}, []byte("x"), nil)
	return err
}

// TestPerRoute: a listed route takes its burst and refuses the next call,
// ResourceExhausted and Unprocessed, without running its handler; Any
// gives every other route a bucket of its own; with no Any, other routes
// are not limited.
func TestPerRoute(t *testing.T) {
	// Rates so low that no token comes back while the test runs.
	slow := ratelimit.Limit{Rate: 0.001, Burst: 3}
	for _, tc := range []struct {
		name   string
		limits map[string]ratelimit.Limit
		want   map[string]int // calls of 10 each route runs
	}{
		{"listed", map[string]ratelimit.Limit{"T/A": slow}, map[string]int{"T/A": 3, "T/B": 10, "T/C": 10}},
		{"any", map[string]ratelimit.Limit{"T/A": {Rate: 0.001, Burst: 5}, ratelimit.Any: slow}, map[string]int{"T/A": 5, "T/B": 3, "T/C": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran := map[string]int{}
			reg := registry(tc.limits, ran)
			for _, route := range []string{"T/A", "T/B", "T/C"} {
				for i := range 10 {
					err := call(reg, route)
					if i < tc.want[route] {
						if err != nil {
							t.Fatalf("%s call %d: %v", route, i, err)
						}
						continue
					}
					if handler.CodeOf(err) != proto.CodeResourceExhausted || !handler.IsUnprocessed(err) || !strings.Contains(err.Error(), "rate limit") {
						t.Fatalf("%s call %d past the burst: %v, want ResourceExhausted, unprocessed", route, i, err)
					}
				}
				if ran[route] != tc.want[route] {
					t.Errorf("%s: the handler ran %d times, want %d", route, ran[route], tc.want[route])
				}
			}
		})
	}
}

// TestPerRouteRefills: a route at a high rate takes calls again once its
// tokens come back.
func TestPerRouteRefills(t *testing.T) {
	ran := map[string]int{}
	reg := registry(map[string]ratelimit.Limit{"T/A": {Rate: 1000, Burst: 1}}, ran)
	if err := call(reg, "T/A"); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ { // a token every millisecond
		err := call(reg, "T/A")
		if err == nil {
			break
		}
		if !errors.Is(err, handler.ErrResourceExhausted) || i > 1e7 {
			t.Fatalf("after %d refusals: %v", i, err)
		}
	}
	if ran["T/A"] != 2 {
		t.Fatalf("ran %d times, want 2", ran["T/A"])
	}
}

// TestPerRouteBadLimits: a rate that is not positive, or a negative burst,
// is a programming error.
func TestPerRouteBadLimits(t *testing.T) {
	for _, l := range []ratelimit.Limit{{Rate: 0}, {Rate: -1}, {Rate: 1, Burst: -1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("PerRoute took %+v", l)
				}
			}()
			ratelimit.PerRoute(map[string]ratelimit.Limit{"T/A": l})
		}()
	}
}

// TestPerRouteAllocs: checking a call allocates nothing, taken or refused.
func TestPerRouteAllocs(t *testing.T) {
	ran := map[string]int{}
	reg := registry(map[string]ratelimit.Limit{"T/A": {Rate: 1e9, Burst: 1 << 30}, "T/B": {Rate: 0.001, Burst: 1}}, ran)
	rt := reg.Lookup([]byte("T/A"))
	c := &handler.Call{Route: "T/A", Codec: proto.CodecRaw}
	req, reply := []byte("x"), make([]byte, 0, 16)
	if n := testing.AllocsPerRun(1000, func() { _, _ = rt.Serve(c, req, reply[:0]) }); n != 0 {
		t.Errorf("a call taken: %v allocations, want 0", n)
	}
	rb := reg.Lookup([]byte("T/B"))
	cb := &handler.Call{Route: "T/B", Codec: proto.CodecRaw}
	_, _ = rb.Serve(cb, req, reply[:0]) // the one token
	if n := testing.AllocsPerRun(1000, func() { _, _ = rb.Serve(cb, req, reply[:0]) }); n != 0 {
		t.Errorf("a call refused: %v allocations, want 0", n)
	}
}

// TestParseLimits: "ROUTE=RATE[:BURST],...", as rpcd serve's rate-limit
// takes it; each mistake is refused, naming the item.
func TestParseLimits(t *testing.T) {
	got, err := ratelimit.ParseLimits(" Math/Sum=1000:100, *=0.5")
	want := map[string]ratelimit.Limit{"Math/Sum": {Rate: 1000, Burst: 100}, "*": {Rate: 0.5}}
	if err != nil || len(got) != 2 || got["Math/Sum"] != want["Math/Sum"] || got["*"] != want["*"] {
		t.Errorf("%v, %v; want %v", got, err, want)
	}
	if got, err := ratelimit.ParseLimits(" "); got != nil || err != nil {
		t.Errorf("blank: %v, %v; want nil, nil", got, err)
	}
	for list, msg := range map[string]string{
		"Math/Sum":      `"Math/Sum" is not ROUTE=RATE[:BURST]`,
		"Math/Sum=0":    `Math/Sum: rate "0", want calls a second above 0`,
		"Math/Sum=x":    `Math/Sum: rate "x"`,
		"Math/Sum=+Inf": `Math/Sum: rate "+Inf"`,
		"Math/Sum=1:0":  `Math/Sum: burst "0", want 1 or more`,
		"bad route=1":   `"bad route" is no route`,
		"*=1,*=2":       "route * twice",
	} {
		if _, err := ratelimit.ParseLimits(list); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want an error with %q", list, err, msg)
		}
	}
}

// TestPerRouteFrom: each call is held to the Limiter current returns
// then: a new Limiter's buckets are full, the same Limiter keeps its
// tokens, and nil limits nothing.
func TestPerRouteFrom(t *testing.T) {
	var cur atomic.Pointer[ratelimit.Limiter]
	reg := handler.NewRegistry()
	reg.Use(ratelimit.PerRouteFrom(cur.Load))
	ran := 0
	reg.HandleFunc("T/A", func(_ context.Context, req, reply []byte) ([]byte, error) {
		ran++
		return reply, nil
	})
	taken := func(n int) int { // of n calls
		t.Helper()
		ok := 0
		for range n {
			switch err := call(reg, "T/A"); {
			case err == nil:
				ok++
			case handler.CodeOf(err) != proto.CodeResourceExhausted:
				t.Fatalf("a call refused with %v, want ResourceExhausted", err)
			}
		}
		return ok
	}
	if n := taken(10); n != 10 {
		t.Fatalf("no Limiter: %d of 10 calls taken, want all", n)
	}
	two := ratelimit.NewLimiter(map[string]ratelimit.Limit{"T/A": {Rate: 0.001, Burst: 2}})
	cur.Store(two)
	if n := taken(5); n != 2 {
		t.Fatalf("burst 2: %d of 5 calls taken", n)
	}
	cur.Store(two)
	if n := taken(5); n != 0 {
		t.Fatalf("the same Limiter again: %d of 5 calls taken, want 0 (its bucket is empty)", n)
	}
	cur.Store(ratelimit.NewLimiter(map[string]ratelimit.Limit{"T/A": {Rate: 0.001, Burst: 4}}))
	if n := taken(5); n != 4 {
		t.Fatalf("a new Limiter of burst 4: %d of 5 calls taken", n)
	}
	cur.Store(nil)
	if n := taken(5); n != 5 {
		t.Fatalf("the Limiter removed: %d of 5 calls taken", n)
	}
	if ran != 10+2+4+5 {
		t.Errorf("the handler ran %d times, want %d", ran, 10+2+4+5)
	}
}

// TestPerRouteFromAllocs: with a Limiter swapped in, checking a call
// allocates nothing, as PerRoute's.
func TestPerRouteFromAllocs(t *testing.T) {
	var cur atomic.Pointer[ratelimit.Limiter]
	cur.Store(ratelimit.NewLimiter(map[string]ratelimit.Limit{"T/A": {Rate: 1e9, Burst: 1 << 30}}))
	reg := handler.NewRegistry()
	reg.Use(ratelimit.PerRouteFrom(cur.Load))
	reg.HandleFunc("T/A", func(_ context.Context, req, reply []byte) ([]byte, error) { return reply, nil })
	rt := reg.Lookup([]byte("T/A"))
	c := &handler.Call{Route: "T/A", Codec: proto.CodecRaw}
	req, reply := []byte("x"), make([]byte, 0, 16)
	if n := testing.AllocsPerRun(1000, func() { _, _ = rt.Serve(c, req, reply[:0]) }); n != 0 {
		t.Errorf("a call taken: %v allocations, want 0", n)
	}
}
