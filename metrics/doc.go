// Package metrics counts the calls a handler.Registry serves, by route:
// calls by outcome code, calls in flight, and a latency histogram. It
// works with any transport, as handler middleware, and exports what it
// counts to Prometheus as a prometheus.Collector.
//
//	m := metrics.New()
//	reg.Use(m.Middleware())          // before other middleware: it times them too
//	prometheus.MustRegister(m)       // rpcd_calls_total, rpcd_call_duration_seconds, ...
//
// A client's calls are counted the same way by package clientmetrics's
// interceptor over a NewClient, exported as rpcd_client_calls_total and
// the rest (this package does not import rpcd's client):
//
//	cm := metrics.NewClient()
//	c, err := client.Dial(ctx, addr, client.Options{Interceptors: []client.Interceptor{clientmetrics.Interceptor(cm)}})
//	prometheus.MustRegister(cm)
//
// Counting costs the call path no allocation and no lock. Each route's
// counters are made the first time the route is called and kept by the
// middleware's handler for that route (the registry wraps each route's
// handler apart), so later calls reach them without a map lookup or
// building a label. The counters are atomic integers (a call adds to
// three of them, and one more as it starts), kept in a shard per P so that
// calls on different cores do not write one cache line, and a call reads
// the monotonic clock twice; labels, cumulative buckets and percentiles are
// made only when someone reads them: a Prometheus scrape, or Snapshot.
// docs/operating.md has what this costs a call, measured.
//
// The latency histogram has four buckets per power of two of nanoseconds,
// from 128 ns to about 137 s, each at most 25% wide, which is what
// Snapshot's percentiles are read from; Prometheus gets every fourth bound
// of it (the powers of two, 128 ns to 137 s: 31 buckets a route), so
// histogram_quantile works as usual.
//
// What it does not see: calls refused before any handler runs (no such
// route, the server draining, a limit) never reach middleware; the reactor
// counts those (reactor.Stats.Errors). The time measured is the handler's
// and the middleware's inside this one, not the time a call waited in a
// socket or in the blocking pool's queue.
package metrics
