package reactor

import (
	"time"

	"github.com/rpcd/rpcd/handler"
)

// The watchdog looks, every InlineThreshold/2, at what each connection's
// loop runs inline: the runner marks every inline call on the
// connection's transport.Watch (two atomic adds), and the runner's Check
// tells a handler that has held its loop past InlineThreshold, a handler
// that never returns among them, since it needs nothing from the handler
// but the mark it left going in. The loops never wait for the watchdog
// nor hear from it; it costs them nothing but those marks.

// watchdog runs until stop closes, unless Options.InlineThreshold turns
// it off.
func (s *Server) watchdog(stop <-chan struct{}) {
	threshold := s.opts.InlineThreshold
	if threshold < 0 {
		return
	}
	tick := time.NewTicker(max(threshold/2, time.Millisecond))
	defer tick.Stop()
	var conns []*conn
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			conns = s.snapshot(conns[:0])
			for _, c := range conns {
				s.run.Check(&c.inline, now, threshold, c.remote)
			}
			clear(conns) // hold no connection past its close
		}
	}
}

// Routes lists the routes the server serves, as its registry does
// (handler.Registry.Routes): where each runs, the routes that moved from
// the event loop to the blocking pool, and each one's inline overruns.
func (s *Server) Routes() []handler.RouteInfo { return s.reg.Routes() }
