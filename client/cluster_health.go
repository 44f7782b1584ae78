package client

import (
	"bytes"
	"context"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// HealthRoute is the route rpcd serve answers with its status:
// "SERVING", or "NOT_SERVING" (JSON strings) from the moment it begins to
// drain (handler/builtin's HandleHealth).
const HealthRoute = "Sys/Health"

// HealthCheck is ServiceOptions.HealthCheck: each node is asked its
// status every Interval, as gRPC's health checking does, and a node that
// says it is not serving, or does not answer within Timeout, gets calls
// only when no other node can take them, until it answers that it serves
// again. A node that has no such route (NotFound) counts as serving. The
// checks are calls of their own: they do not count in a node's calls, its
// breaker or the retry budget.
type HealthCheck struct {
	// Interval is the time between checks of a node; 0, the default,
	// checks none.
	Interval time.Duration
	// Timeout bounds each check; default Interval, at most a second.
	Timeout time.Duration
	// Route is the route asked; default HealthRoute. Its reply
	// "NOT_SERVING" (a JSON string) says the node does not serve; any
	// other reply says it does, so a route such as Sys/Ping checks that a
	// node answers at all.
	Route string
}

// notServingReply is the reply that says a node does not serve.
var notServingReply = []byte(`"NOT_SERVING"`)

// checkHealth asks m, at addr, its status every HealthCheck.Interval,
// from the moment it joins until it leaves or the cluster closes.
func (k *Cluster) checkHealth(m *node, addr string) {
	defer k.wg.Done()
	hc := k.opts.HealthCheck
	t := time.NewTicker(hc.Interval)
	defer t.Stop()
	var reply []byte
	for !m.gone.Load() {
		ctx, cancel := context.WithTimeout(k.ctx, hc.Timeout)
		var err error
		reply, err = m.c.CallRaw(ctx, hc.Route, nil, reply[:0])
		cancel()
		if k.closed.Load() {
			return
		}
		serving, why := true, ""
		switch {
		case err == nil && bytes.Equal(reply, notServingReply):
			serving, why = false, "it says NOT_SERVING"
		case err == nil, handler.CodeOf(err) == proto.CodeNotFound:
		default:
			serving, why = false, handler.MessageOf(err)
		}
		if was := !m.notServing.Swap(!serving); was != serving {
			if serving {
				k.node.Logger.Info("rpcd: node serving again", "service", k.name, "addr", addr)
			} else {
				k.node.Logger.Warn("rpcd: node not serving; calls go to others", "service", k.name, "addr", addr, "why", why)
			}
		}
		select {
		case <-t.C:
		case <-k.ctx.Done():
			return
		}
	}
}
