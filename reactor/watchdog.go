package reactor

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
)

// The watchdog looks, every InlineThreshold/2, at what each event loop,
// and each connection on a goroutine of its own, runs inline: the runner
// marks every inline call on the loop's transport.Watch (two atomic adds),
// and the runner's Check tells a handler that has held its loop past
// InlineThreshold, a handler that never returns among them, since it
// needs nothing from the handler but the mark it left going in. The loops
// never wait for the watchdog nor hear from it; it costs them nothing but
// those marks.
//
// One watch a loop, not one a connection: an inline handler holds its
// loop, so a loop runs one at a time, and the watchdog's look costs a few
// watches, not every connection (20 looks a second over 10,000
// connections were 2.4 % of the server's CPU in rpcd soak). A loop's
// watch notes the connection whose call it runs, for the report, only
// when it changes from the last one's.

// loopWatch is the watch of one event loop, or of one connection served
// on a goroutine of its own (the standard library transport, or one handed
// off by its loop): the inline handler it runs, and the connection whose
// call that is.
type loopWatch struct {
	w     transport.Watch
	cur   atomic.Pointer[conn] // the connection of the call running, or of the last one
	last  *conn                // cur as the runner last stored it; the runner's own
	owner *conn                // the connection it is of alone; nil for a loop's
}

// running returns the watch for c's inline call, about to run under lw,
// noting c as the call's connection if it is not already.
func (lw *loopWatch) running(c *conn) *transport.Watch {
	if lw.last != c {
		lw.last = c
		lw.cur.Store(c)
	}
	return &lw.w
}

// loopWatchOf returns the watch of el, the event loop of a connection
// opening on it, made and watched at its first connection; a watch of the
// connection's own, c's, if el is nil (a test's connection).
func (s *Server) loopWatchOf(el gnet.EventLoop, c *conn) *loopWatch {
	if el == nil {
		return s.ownWatch(c)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	lw := s.loopWatches[el]
	if lw == nil {
		lw = new(loopWatch)
		s.loopWatches[el] = lw
		s.watches[lw] = struct{}{}
	}
	return lw
}

// ownWatch returns a watch of c's own, watched until c is forgotten: for a
// connection served on a goroutine of its own.
func (s *Server) ownWatch(c *conn) *loopWatch {
	lw := &loopWatch{owner: c}
	s.mu.Lock()
	s.watches[lw] = struct{}{}
	s.mu.Unlock()
	return lw
}

// unwatchLocked stops watching c's own watch, if it has one; with s.mu
// held.
func (s *Server) unwatchLocked(c *conn) {
	if lw := c.lw; lw != nil && lw.owner == c {
		delete(s.watches, lw)
	}
}

// watchdog runs until stop closes, unless Options.InlineThreshold turns
// it off.
func (s *Server) watchdog(stop <-chan struct{}) {
	threshold := s.opts.InlineThreshold
	if threshold < 0 {
		return
	}
	tick := time.NewTicker(max(threshold/2, time.Millisecond))
	defer tick.Stop()
	var watches []*loopWatch
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			s.mu.Lock()
			for lw := range s.watches {
				watches = append(watches, lw)
			}
			s.mu.Unlock()
			for _, lw := range watches {
				var remote net.Addr
				if c := lw.cur.Load(); c != nil {
					remote = c.remote
				}
				s.run.Check(&lw.w, now, threshold, remote)
			}
			clear(watches) // hold no connection past its close
			watches = watches[:0]
		}
	}
}

// Routes lists the routes the server serves, as its registry does
// (handler.Registry.Routes): where each runs, the routes that moved from
// the event loop to the blocking pool, and each one's inline overruns.
func (s *Server) Routes() []handler.RouteInfo { return s.reg.Routes() }
