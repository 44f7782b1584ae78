package gateway

import (
	"bufio"
	"cmp"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/proto"
)

// The route labels of responses that name no registered route; every
// other response is counted under the name of the route it called, so
// that the labels are bounded by the registry, whatever paths clients
// make up. (A route registered under one of these names shares its
// label.)
const (
	// RouteUnknown counts the requests whose path names no registered
	// route: outside the prefix, or under it with a name no route has.
	RouteUnknown = "unknown"
	// RouteJSONRPC counts the responses of the JSON-RPC handler (JSONRPC).
	RouteJSONRPC = "jsonrpc"
	// RouteWebSocket is the label `rpcd serve` counts WebSocket upgrades
	// at /ws under (Counted).
	RouteWebSocket = "ws"
	// RouteOpenAPI is the label `rpcd serve` counts the OpenAPI document's
	// responses at /openapi.json under (Counted).
	RouteOpenAPI = "openapi"
)

// Stats is a snapshot of a Gateway's counters, for metrics and admin
// pages. They run from New and never go down.
type Stats struct {
	// Responses counts every response the gateway wrote, by route label
	// and HTTP status, sorted by route and then status: its own, its
	// JSON-RPC handler's, and those of the handlers Counted wraps.
	Responses []ResponseCount

	// Errors counts the calls answered with an error, by code (index with
	// transport.CodeSlot), as reactor.Stats.Errors counts the Error frames of the
	// RPC port: a request under the prefix answered with an error body
	// (refusals before any handler included: no such route, a method, a
	// content type, credentials, a body too large), and each JSON-RPC
	// call answered with an error object (a body that is no JSON, or no
	// request object, as InvalidArgument) or refused whole by an error
	// body. A path outside the prefix is no call, and JSON-RPC
	// notifications get no answer: neither is counted here.
	Errors [transport.CodeSlots]uint64
}

// ResponseCount is the number of responses of one route label with one
// HTTP status.
type ResponseCount struct {
	Route  string // a registered route's name, or RouteUnknown, RouteJSONRPC, RouteWebSocket
	Status int    // 101 for a WebSocket upgrade
	Count  uint64
}

// counters are a Gateway's counts. Responses are a map under a mutex: a
// request takes it once, for a lookup and an add, against the
// microseconds net/http takes to serve it; its keys are route labels,
// bounded by the registry, and statuses.
type counters struct {
	mu        sync.Mutex
	responses map[responseKey]uint64
	errors    [transport.CodeSlots]atomic.Uint64
}

type responseKey struct {
	route  string
	status int
}

// response counts a response of route with status.
func (c *counters) response(route string, status int) {
	c.mu.Lock()
	if c.responses == nil {
		c.responses = make(map[responseKey]uint64)
	}
	c.responses[responseKey{route, status}]++
	c.mu.Unlock()
}

// failed counts a call answered with an error of code.
func (c *counters) failed(code proto.Code) { c.errors[transport.CodeSlot(code)].Add(1) }

// Stats returns the gateway's counters now.
func (g *Gateway) Stats() Stats {
	var st Stats
	g.counts.mu.Lock()
	st.Responses = make([]ResponseCount, 0, len(g.counts.responses))
	for k, n := range g.counts.responses {
		st.Responses = append(st.Responses, ResponseCount{Route: k.route, Status: k.status, Count: n})
	}
	g.counts.mu.Unlock()
	slices.SortFunc(st.Responses, func(a, b ResponseCount) int {
		return cmp.Or(cmp.Compare(a.Route, b.Route), cmp.Compare(a.Status, b.Status))
	})
	for i := range st.Errors {
		st.Errors[i] = g.counts.errors[i].Load()
	}
	return st
}

// tally is how a response to the gateway is counted: under its route
// label, and, for a call, an error that answers it by its code.
type tally struct {
	route string
	call  bool
}

// Counted returns h with every response it writes counted in the
// gateway's Stats under the label route, as the gateway counts its own:
// for a handler served beside the gateway on its listener, such as
// ws.Handler at /ws, whose upgrades count as 101 once the connection is
// hijacked. Each response is counted before its first byte is written.
// Its errors are not counted in Stats.Errors: calls over a WebSocket are
// the reactor's, counted in reactor.Stats.
func (g *Gateway) Counted(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := &countingWriter{ResponseWriter: w, counts: &g.counts, route: route}
		h.ServeHTTP(cw, r)
		cw.count(http.StatusOK) // a handler that wrote nothing answered 200
	})
}

// countingWriter counts the response written through it once: at its
// status, at its first Write (200), or at a hijack (101).
type countingWriter struct {
	http.ResponseWriter
	counts  *counters
	route   string
	counted bool
}

func (w *countingWriter) count(status int) {
	if !w.counted {
		w.counted = true
		w.counts.response(w.route, status)
	}
}

// WriteHeader implements http.ResponseWriter; informational statuses
// (1xx) are not the response.
func (w *countingWriter) WriteHeader(status int) {
	if status >= 200 {
		w.count(status)
	}
	w.ResponseWriter.WriteHeader(status)
}

// Write implements http.ResponseWriter.
func (w *countingWriter) Write(b []byte) (int, error) {
	w.count(http.StatusOK)
	return w.ResponseWriter.Write(b)
}

// Hijack implements http.Hijacker, which a WebSocket upgrade needs: the
// handler writes 101 Switching Protocols on the connection itself.
func (w *countingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, http.ErrNotSupported
	}
	conn, rw, err := hj.Hijack()
	if err == nil {
		w.count(http.StatusSwitchingProtocols)
	}
	return conn, rw, err
}

// Flush implements http.Flusher.
func (w *countingWriter) Flush() {
	w.count(http.StatusOK)
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap returns the ResponseWriter it wraps, for http.ResponseController.
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
