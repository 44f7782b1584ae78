package reactor

import (
	"sync/atomic"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/proto"
)

// Stats is a snapshot of a Server's counters, for metrics and admin pages.
// The counters run from New and never go down; the gauges (Conns,
// Blocking, Draining) are as of the call.
type Stats struct {
	Conns         int    // connections open now
	ConnsOpened   uint64 // connections taken in and served
	ConnsRefused  uint64 // connections turned away at once: past MaxConns, or while draining
	BytesIn       uint64 // bytes read from connections (after TLS, on the TLS transport)
	BytesOut      uint64 // bytes written to connections (before TLS)
	SlowConsumers uint64 // connections closed because their peer took none of their output for WriteTimeout
	HandedOff     uint64 // connections moved off their event loop to a goroutine of their own (docs/protocol.md, "The connection's life")
	Blocking      int    // Blocking calls queued for the pool or running on it
	Draining      bool   // Shutdown has begun: the server takes no new connection or call

	// Errors counts the Error frames that answered calls, by code (index
	// with transport.CodeSlot): calls whose handler failed, and calls refused before
	// any handler ran (no such route, draining, over a limit).
	Errors [transport.CodeSlots]uint64
}

// serverStats are the counters behind Stats. The loops add to them per
// event (a connection opened or refused, a call failed), never per call on
// a call that succeeds nor per wake-up: the bytes of an open connection are
// counted on the connection (conn.bytesIn, conn.bytesOut), and bytesIn and
// bytesOut here are those of the connections closed.
type serverStats struct {
	connsOpened   atomic.Uint64
	connsRefused  atomic.Uint64
	bytesIn       atomic.Uint64 // under Server.mu, with the connection's removal
	bytesOut      atomic.Uint64
	slowConsumers atomic.Uint64
	handedOff     atomic.Uint64
	errors        [transport.CodeSlots]atomic.Uint64
}

// callFailed counts an Error frame that answers a call with err.
func (st *serverStats) callFailed(err error) { st.callRefused(handler.CodeOf(err)) }

// callRefused counts an Error frame that answers a call with code.
func (st *serverStats) callRefused(code proto.Code) { st.errors[transport.CodeSlot(code)].Add(1) }

// Stats returns the server's counters now. It adds up the bytes of every
// open connection, so it costs a look at each.
func (s *Server) Stats() Stats {
	st := &s.stats
	out := Stats{
		Conns:         int(s.nconns.Load()),
		ConnsOpened:   st.connsOpened.Load(),
		ConnsRefused:  st.connsRefused.Load(),
		SlowConsumers: st.slowConsumers.Load(),
		HandedOff:     st.handedOff.Load(),
		Blocking:      int(s.inflight.Load()),
		Draining:      s.draining.Load(),
	}
	s.mu.Lock()
	out.BytesIn, out.BytesOut = st.bytesIn.Load(), st.bytesOut.Load()
	for c := range s.conns {
		out.BytesIn += c.bytesIn.Load()
		out.BytesOut += c.bytesOut.Load()
	}
	s.mu.Unlock()
	for i := range out.Errors {
		out.Errors[i] = st.errors[i].Load()
	}
	return out
}

// Ready reports whether the server is accepting connections: it has
// started and has not begun to drain. A load balancer's readiness check
// asks this.
func (s *Server) Ready() bool {
	return s.Addr() != nil && !s.draining.Load()
}
