package metrics

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	_ "unsafe" // for go:linkname

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/proto"
)

// codeNames are the label values of the codes, as docs/protocol.md names
// them.
var codeNames = [transport.CodeSlots]string{
	"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound",
	"AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
	"Aborted", "OutOfRange", "Unimplemented", "Internal", "Unavailable", "DataLoss",
	"Unauthenticated", "Other",
}

// CodeName returns the name of the outcome counted at slot: "OK",
// "NotFound", ..., or "Other" for the codes above 16.
func CodeName(slot int) string { return codeNames[min(max(slot, 0), transport.CodeSlots-1)] }

// Metrics holds the counters of every route it has seen. The zero Metrics
// is not usable; call New.
type Metrics struct {
	mu     sync.Mutex
	routes map[string]*route
	byName sync.Map // route name -> *route, for Counter, whose callers serve every route
	descs  descs
}

// New returns a Metrics with no route counted yet, for a server: its
// Middleware counts the calls a registry serves, exported as rpcd_calls_*.
func New() *Metrics {
	return &Metrics{routes: make(map[string]*route), descs: serverDescs}
}

// NewClient returns a Metrics for a client: clientmetrics.Interceptor
// counts with it the calls a client.Client or client.Cluster sends,
// exported as rpcd_client_calls_*, so that a process that serves and calls
// can register both.
func NewClient() *Metrics {
	return &Metrics{routes: make(map[string]*route), descs: clientDescs}
}

// route holds one route's counters, split into shards: a call adds to
// the shard of the P it runs on, so that the event loops and callers on
// different cores do not take turns at one cache line (docs/operating.md,
// "What counting costs"). A route has a shard per P, up to maxShards.
type route struct {
	name   string
	shards []shard
}

// maxShards bounds a route's shards, and so its memory (1,280 bytes a
// shard): Ps past it share shards.
const maxShards = 16

// shard is a share of one route's counters. A call adds to started as it
// begins, and to one code counter, one latency bucket and the latency sum
// as it ends: a call is in flight while it is counted in started and not
// yet by a code (in any shard: a call may begin on one P and end on
// another).
type shard struct {
	started atomic.Uint64
	sum     atomic.Int64 // nanoseconds
	codes   [transport.CodeSlots]atomic.Uint64
	buckets [NumBuckets]atomic.Uint64
	_       [shardPad]byte
}

// shardPad makes a shard a whole number of 128-byte blocks (a cache line
// and the one the CPU fetches with it) with at least 128 bytes after the
// counters, so that neighbouring shards share no line however the slice
// is aligned.
const shardPad = 128 + (128-(2+transport.CodeSlots+NumBuckets)*8%128)%128

// route returns the counters of the route named name, making them the
// first time.
func (m *Metrics) route(name string) *route {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.routes[name]
	if r == nil {
		r = &route{name: strings.Clone(name), shards: make([]shard, min(runtime.GOMAXPROCS(0), maxShards))}
		m.routes[r.name] = r
	}
	return r
}

// here returns the shard of the P the caller runs on. It is a hint of
// locality, not a lock: the goroutine may move at once, and every counter
// is atomic.
func (r *route) here() *shard {
	p := procPin()
	procUnpin()
	return &r.shards[uint(p)%uint(len(r.shards))]
}

// start counts a call begun.
func (r *route) start() { r.here().started.Add(1) }

// done counts a call ended with code after d.
func (r *route) done(code proto.Code, d time.Duration) {
	s := r.here()
	s.codes[transport.CodeSlot(code)].Add(1)
	s.buckets[bucketOf(int64(d))].Add(1)
	s.sum.Add(int64(d))
}

// Middleware returns handler middleware that counts each call of every
// route it wraps: its outcome code (a panic counts as Internal), its
// latency, and that it is in flight. Use it outermost (the first given to
// Registry.Use) to count the calls other middleware refuses, such as
// auth.Require's.
func (m *Metrics) Middleware() handler.Middleware {
	return func(next handler.Handler) handler.Handler {
		return &counted{m: m, next: next}
	}
}

// counted is the middleware for one route: the registry wraps each route's
// handler apart, so it remembers the route's counters after the first
// call, and looks them up again only if it sees another route (the same
// handler wrapped once and registered twice).
type counted struct {
	m    *Metrics
	next handler.Handler
	r    atomic.Pointer[route]
}

// ServeRPC implements handler.Handler.
func (h *counted) ServeRPC(ctx context.Context, req, reply []byte) ([]byte, error) {
	name := ""
	if c := handler.CallFrom(ctx); c != nil {
		name = c.Route
	}
	r := h.r.Load()
	if r == nil || r.name != name {
		r = h.m.route(name)
		h.r.Store(r)
	}
	r.start()
	start := nanotime()
	finished := false
	defer func() {
		if !finished { // the handler panicked: Route.Serve answers Internal
			r.done(proto.CodeInternal, time.Duration(nanotime()-start))
		}
	}()
	out, err := h.next.ServeRPC(ctx, req, reply)
	finished = true
	r.done(handler.CodeOf(err), time.Duration(nanotime()-start))
	return out, err
}

// A Counter counts the calls of one route of a Metrics made outside a
// registry: clientmetrics' interceptor counts a client's calls with it.
// Start as a call begins, Done with what Start returned as it ends.
type Counter struct{ r *route }

// Counter returns the counter of the route called name; the first call
// of a route makes it. It is
// found without a lock and without allocating once the route has been
// seen.
func (m *Metrics) Counter(name string) Counter {
	if v, ok := m.byName.Load(name); ok {
		return Counter{v.(*route)}
	}
	r := m.route(name)
	m.byName.Store(r.name, r)
	return Counter{r}
}

// Start counts a call begun, and returns when it began.
func (c Counter) Start() int64 {
	c.r.start()
	return nanotime()
}

// Done counts a call begun at start (Start's) ended with code.
func (c Counter) Done(start int64, code proto.Code) {
	c.r.done(code, time.Duration(nanotime()-start))
}

// nanotime is the runtime's monotonic clock, in nanoseconds. It is what
// time.Now and time.Since read too, but time.Now also reads the wall
// clock: timing a call with nanotime takes two clock reads instead of
// three, about 45 ns less on the machine of docs/performance.md. The
// runtime keeps it reachable by go:linkname for the packages that use it
// so (bytedance/sonic, which rpcd already uses, is one).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// procPin and procUnpin keep the calling goroutine on its P between them
// and return that P's number; sync.Pool finds its per-P shard so. The
// runtime keeps them reachable by go:linkname for the packages that use
// them so (go.dev/issue/67401 lists them).
//
//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

// RouteStats is a snapshot of one route's counters.
type RouteStats struct {
	Route    string
	InFlight uint64                      // calls begun and not ended
	Calls    [transport.CodeSlots]uint64 // ended calls by outcome; index with transport.CodeSlot
	Latency  Histogram                   // of the ended calls
}

// Total returns the number of calls ended, whatever their outcome.
func (s *RouteStats) Total() uint64 {
	var n uint64
	for _, c := range s.Calls {
		n += c
	}
	return n
}

// Errors returns the number of calls that ended with an error.
func (s *RouteStats) Errors() uint64 { return s.Total() - s.Calls[0] }

// Snapshot returns the counters of every route seen so far, sorted by
// route name. Counters of one route are read one after another while
// calls go on, so they may disagree by the calls that ended meanwhile.
func (m *Metrics) Snapshot() []RouteStats {
	m.mu.Lock()
	rs := make([]*route, 0, len(m.routes))
	for _, r := range m.routes {
		rs = append(rs, r)
	}
	m.mu.Unlock()
	slices.SortFunc(rs, func(a, b *route) int { return strings.Compare(a.name, b.name) })
	out := make([]RouteStats, len(rs))
	for i, r := range rs {
		s := &out[i]
		s.Route = r.name
		// The ended calls first, from every shard: started is read after,
		// so that it is never behind them and InFlight never goes below 0.
		var started uint64
		for k := range r.shards {
			sh := &r.shards[k]
			for j := range s.Calls {
				s.Calls[j] += sh.codes[j].Load()
			}
			for j := range s.Latency.Counts {
				s.Latency.Counts[j] += sh.buckets[j].Load()
			}
			s.Latency.Sum += time.Duration(sh.sum.Load())
		}
		for k := range r.shards {
			started += r.shards[k].started.Load()
		}
		s.InFlight = started - min(started, s.Total())
	}
	return out
}
