// Package ratelimit holds the routes of a handler.Registry to rates: a
// token bucket per route, which a call past it finds empty. Such a call is
// refused at once with ResourceExhausted, marked Unprocessed, so that its
// client may send it again later or to another server; it never waits,
// since a handler may run on an event loop, which must not block.
//
//	reg.Use(ratelimit.PerRoute(map[string]ratelimit.Limit{
//		"Math/Sum": {Rate: 1000, Burst: 100}, // 1,000 calls a second, 100 at once
//		"*":        {Rate: 50000},            // every other route, each its own bucket
//	}))
//
// It works with any transport, as handler middleware: the gateway's calls
// and the main port's share a route's bucket. Checking a call costs no
// allocation, a refused one included; the bucket is
// golang.org/x/time/rate's, under its mutex. Limits that change while the
// server runs are a Limiter swapped whole (PerRouteFrom), as rpcd serve's
// reload does.
package ratelimit

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"golang.org/x/time/rate"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// Limit is a route's rate: Rate calls a second on average, and up to Burst
// at once after a lull; Burst 0 means one second's worth, at least 1.
type Limit struct {
	Rate  float64
	Burst int
}

// Any is the key of limits whose Limit applies to every route not listed,
// each with a bucket of its own.
const Any = "*"

// PerRoute returns middleware that holds each route listed in limits to
// its Limit, and, if limits has Any, every other route to that one. A
// route neither listed nor covered by Any is not limited. It panics on a
// Limit whose Rate is not a positive number or whose Burst is negative.
func PerRoute(limits map[string]Limit) handler.Middleware {
	l := NewLimiter(limits)
	return PerRouteFrom(func() *Limiter { return l })
}

// PerRouteFrom is PerRoute with limits that change while the server runs
// (rpcd serve's reload): each call is held to the Limiter current returns
// at the time, and a nil one limits nothing. A Limiter keeps its routes'
// buckets, so a program that swaps in a new one gives each route a full
// bucket; it keeps the one it has for limits that did not change. current
// runs on every call: it should be as cheap as an atomic load.
func PerRouteFrom(current func() *Limiter) handler.Middleware {
	return func(next handler.Handler) handler.Handler {
		return &limited{current: current, next: next}
	}
}

// A Limiter holds routes to their Limits, PerRoute's way: the limits, and
// each route's bucket once it has been called.
type Limiter struct {
	limits  map[string]Limit
	buckets sync.Map // route -> *bucket
}

// NewLimiter returns a Limiter of limits, for PerRouteFrom. It panics as
// PerRoute does.
func NewLimiter(limits map[string]Limit) *Limiter {
	p := &Limiter{limits: make(map[string]Limit, len(limits))}
	for route, l := range limits {
		if !(l.Rate > 0) || math.IsInf(l.Rate, 0) || l.Burst < 0 {
			panic(fmt.Sprintf("ratelimit: route %s: rate %v, burst %d; want a rate above 0 and a burst of 0 or more", route, l.Rate, l.Burst))
		}
		if l.Burst == 0 {
			l.Burst = int(min(math.Ceil(l.Rate), math.MaxInt32))
		}
		p.limits[route] = l
	}
	return p
}

// bucket is one route's tokens in one Limiter, and the error a call past
// them gets.
type bucket struct {
	of      *Limiter
	route   string
	lim     *rate.Limiter // nil: the route is not limited
	refusal error
}

// bucket returns route's bucket, made the first time it is asked for.
func (p *Limiter) bucket(route string) *bucket {
	if b, ok := p.buckets.Load(route); ok {
		return b.(*bucket)
	}
	b := &bucket{of: p, route: route}
	l, ok := p.limits[route]
	if !ok {
		l, ok = p.limits[Any]
	}
	if ok {
		b.lim = rate.NewLimiter(rate.Limit(l.Rate), l.Burst)
		b.refusal = &handler.Error{Code: proto.CodeResourceExhausted, Unprocessed: true,
			Message: fmt.Sprintf("route %s is over its rate limit (%g calls a second, %d at once)", route, l.Rate, l.Burst)}
	}
	actual, _ := p.buckets.LoadOrStore(route, b)
	return actual.(*bucket)
}

// limited is the middleware for one route: the registry wraps each route's
// handler apart, so it keeps the route's bucket after the first call, and
// looks it up again only if it sees another Limiter or another route (the
// same handler wrapped once and registered twice).
type limited struct {
	current func() *Limiter
	next    handler.Handler
	b       atomic.Pointer[bucket]
}

// ServeRPC implements handler.Handler.
func (h *limited) ServeRPC(ctx context.Context, req, reply []byte) ([]byte, error) {
	p := h.current()
	if p == nil {
		return h.next.ServeRPC(ctx, req, reply)
	}
	route := ""
	if c := handler.CallFrom(ctx); c != nil {
		route = c.Route
	}
	b := h.b.Load()
	if b == nil || b.of != p || b.route != route {
		b = p.bucket(route)
		h.b.Store(b)
	}
	if b.lim != nil && !b.lim.Allow() {
		return reply, b.refusal
	}
	return h.next.ServeRPC(ctx, req, reply)
}
