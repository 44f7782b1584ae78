package handler

import (
	"context"
	"fmt"
	"math"
	"runtime/debug"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/rpcd/rpcd/internal/handlerstate"
	"github.com/rpcd/rpcd/proto"
)

// Registry maps route names to handlers. Lookups take no lock and allocate
// nothing; Handle and Use may run at any time, also while serving. The zero
// Registry is not usable; call NewRegistry.
type Registry struct {
	mu      sync.Mutex // serializes writers
	routes  atomic.Pointer[map[string]*Route]
	streams atomic.Pointer[map[string]*StreamRoute] // see HandleStream; nil until one is registered
	mws     []Middleware
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	r := &Registry{}
	r.routes.Store(&map[string]*Route{})
	return r
}

// Route is a registered route.
type Route struct {
	name     string
	base     Handler // as registered
	handler  Handler // base wrapped by the registry's middleware
	blocking bool    // registered with Blocking
	// state is what handler/transport and handler/schema reach of the
	// route (internal/handlerstate): registered with Inline, its Go types
	// if typed, what it measures of its inline runs. The copies of a Route
	// that Use makes share it.
	state *handlerstate.Route
}

// RouteOption configures a route at registration.
type RouteOption func(*Route)

// Blocking marks a route whose handler may block (disk, network, locks held
// long). The reactor runs it on a bounded goroutine pool instead of inline on
// the event loop; its reply still goes out through the loop.
//
// A route registered without Blocking runs inline, on the event loop that
// read its call, and must not block: calls it makes through a Client, a
// Cluster or its Peer that would wait for a reply are refused at once
// (transport.RefuseWait). A route whose inline runs keep passing their
// budget moves itself to the pool (see transport.Runner), unless it is
// registered with Inline.
func Blocking() RouteOption { return func(r *Route) { r.blocking = true } }

// Inline pins a route to the event loop: it runs inline even if its runs
// keep passing the inline budget, which would otherwise move it to the
// blocking pool (see transport.Runner). The watchdog still reports its
// overruns. A route cannot be both Blocking and Inline.
func Inline() RouteOption { return func(r *Route) { r.state.Pinned = true } }

// Handle registers h for route. A route is 1 to proto.DefaultMaxRoute bytes
// of printable ASCII, by convention "Controller/Action". Handle panics if the
// name is not valid or is taken, as these are programming errors.
func (r *Registry) Handle(route string, h Handler, opts ...RouteOption) {
	if err := ValidRoute(route); err != nil {
		panic(err)
	}
	if h == nil {
		panic("rpcd: nil handler for route " + route)
	}
	rt := &Route{name: route, base: h, state: new(handlerstate.Route)}
	for _, o := range opts {
		o(rt)
	}
	if rt.blocking && rt.state.Pinned {
		panic("rpcd: route " + route + " registered both Blocking and Inline")
	}
	if t, ok := h.(typer); ok { // Func's: handler/schema describes its types
		rt.state.Arg, rt.state.Reply = t.types()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.routes.Load()
	if _, dup := old[route]; dup {
		panic("rpcd: route " + route + " registered twice")
	}
	rt.handler = Chain(h, r.mws...)
	next := make(map[string]*Route, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[route] = rt
	r.routes.Store(&next)
}

// HandleFunc registers fn for route; see Handle.
func (r *Registry) HandleFunc(route string, fn func(ctx context.Context, req, reply []byte) ([]byte, error), opts ...RouteOption) {
	r.Handle(route, HandlerFunc(fn), opts...)
}

// Use appends middleware that wraps every route, registered before or after.
// The first middleware given is the outermost.
func (r *Registry) Use(mws ...Middleware) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mws = append(r.mws, mws...)
	old := *r.routes.Load()
	next := make(map[string]*Route, len(old))
	for k, v := range old {
		rt := *v
		rt.handler = Chain(rt.base, r.mws...)
		next[k] = &rt
	}
	r.routes.Store(&next)
}

// Lookup returns the route named by the bytes of name, or nil.
func (r *Registry) Lookup(name []byte) *Route {
	return (*r.routes.Load())[string(name)]
}

// RouteCache remembers the route a connection looked up last, as calls on
// one connection often go to one route. The zero RouteCache is empty. It is
// not safe for concurrent use.
type RouteCache struct {
	table *map[string]*Route
	route *Route
}

// LookupCached is Lookup through c: the last route found is compared by
// name instead of hashed, as long as the registry has not changed since.
func (r *Registry) LookupCached(name []byte, c *RouteCache) *Route {
	t := r.routes.Load()
	if c.table == t && c.route != nil && string(name) == c.route.name {
		return c.route
	}
	rt := (*t)[string(name)]
	if rt != nil {
		c.table, c.route = t, rt
	}
	return rt
}

// RouteInfo describes a registered route.
type RouteInfo struct {
	Name     string `json:"name"`
	Blocking bool   `json:"blocking,omitempty"` // runs on the blocking pool: registered so, or Moved
	Moved    bool   `json:"moved,omitempty"`    // moved itself to the pool: its inline runs kept passing their budget
	Inline   bool   `json:"inline,omitempty"`   // pinned to the event loop (registered with Inline)
	Overruns uint64 `json:"overruns,omitempty"` // inline runs a watchdog saw pass its threshold
	Stream   bool   `json:"stream,omitempty"`   // a stream route (HandleStream)
}

// Notes says in words where the route runs and what the watchdog saw of
// it: "blocking", "moved from the event loop", "pinned inline", "9 inline
// overruns", "stream" (rpcd routes prints them); none for a route inline
// and unremarked.
func (r RouteInfo) Notes() []string {
	var notes []string
	if r.Blocking {
		notes = append(notes, "blocking")
	}
	if r.Moved {
		notes = append(notes, "moved from the event loop")
	}
	if r.Inline {
		notes = append(notes, "pinned inline")
	}
	switch {
	case r.Overruns == 1:
		notes = append(notes, "1 inline overrun")
	case r.Overruns > 1:
		notes = append(notes, strconv.FormatUint(r.Overruns, 10)+" inline overruns")
	}
	if r.Stream {
		notes = append(notes, "stream")
	}
	return notes
}

// Routes lists the registered routes, stream routes among them, sorted by
// name.
func (r *Registry) Routes() []RouteInfo {
	m := *r.routes.Load()
	out := make([]RouteInfo, 0, len(m))
	for _, rt := range m {
		moved := rt.state.Moved.Load()
		out = append(out, RouteInfo{Name: rt.name, Blocking: rt.blocking || moved, Moved: moved,
			Inline: rt.state.Pinned, Overruns: rt.state.Overruns.Load()})
	}
	for _, name := range r.StreamRoutes() {
		out = append(out, RouteInfo{Name: name, Stream: true})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Name returns the route's name.
func (rt *Route) Name() string { return rt.name }

// IsBlocking reports whether the route runs on the blocking pool: it was
// registered with Blocking, or its inline runs kept passing their budget
// and it moved itself there. A transport asks at every call: a route that
// moves runs on the pool from its next call on.
func (rt *Route) IsBlocking() bool { return rt.blocking || rt.state.Moved.Load() }

// Serve runs the route's handler (with middleware) on req and appends the
// reply to buf, returning the extended buf. The handler gets an empty slice
// over buf's spare capacity, so a reply that fits is written in place. A panic
// in the handler is returned as a *PanicError, an Internal error on the wire,
// for the transport to log; on any error, buf comes back as it was given.
func (rt *Route) Serve(ctx context.Context, req, buf []byte) ([]byte, error) {
	out, _, err := rt.ServeOwn(ctx, req, buf, math.MaxInt) // no reply is that large: all in out
	return out, err
}

// ServeOwn is Serve for a transport that can write a large reply from where
// the handler left it: a reply of at least large bytes that the handler did
// not append to buf in place (an echo returns req itself) comes back as own,
// not copied, and out is buf as it was given. own is req's memory or the
// handler's: the transport writes it before it reuses req, and the handler
// does not change it once returned.
func (rt *Route) ServeOwn(ctx context.Context, req, buf []byte, large int) (out, own []byte, err error) {
	start := len(buf)
	defer func() {
		if p := recover(); p != nil {
			out, own, err = buf[:start], nil, rt.panicked(p)
		}
	}()
	reply, err := rt.handler.ServeRPC(ctx, req, buf[start:start])
	return placeReply(buf, start, reply, large, err)
}

// placeReply returns ServeOwn's results for a handler that returned reply
// and err, given buf whose first start bytes were there before it ran.
func placeReply(buf []byte, start int, reply []byte, large int, err error) ([]byte, []byte, error) {
	switch {
	case err != nil:
		return buf, nil, err
	case len(reply) == 0:
		return buf, nil, nil
	case cap(buf) > start && &reply[0] == &buf[start : start+1][0]:
		return buf[:start+len(reply)], nil, nil // appended in place
	case len(reply) >= large:
		return buf, reply, nil
	}
	return append(buf, reply...), nil, nil
}

// panicked is the error of rt's handler that panicked with p, on the
// handler's goroutine: its stack is taken here.
func (rt *Route) panicked(p any) error {
	return &PanicError{Route: rt.name, Value: p, Stack: debug.Stack()}
}

// ValidRoute reports why name cannot be a route, or nil if it can.
func ValidRoute(name string) error {
	if len(name) == 0 || len(name) > proto.DefaultMaxRoute {
		return fmt.Errorf("rpcd: route %q has %d bytes, want 1 to %d", name, len(name), proto.DefaultMaxRoute)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("rpcd: route %q has byte 0x%02x, want printable ASCII", name, c)
		}
	}
	return nil
}
