package handler

import (
	"context"

	"github.com/rpcd/rpcd/internal/handlerstate"
)

// The accessors through which handler/transport and handler/schema reach
// what handler keeps of a route and of an error (internal/handlerstate).
// Each is called once per route described, per timed inline run or
// watchdog look, or per Unprocessed error, and CancelWhen once per call of
// a transport that watches its request (the gateway): none allocates.
func init() {
	handlerstate.RouteOf = func(rt *Route) *handlerstate.Route { return rt.state }
	handlerstate.IsReceived = func(e *Error) bool { return e.received }
	handlerstate.MarkReceived = func(e *Error) *Error {
		if e.received {
			return e
		}
		cp := *e
		cp.received = true
		return &cp
	}
	handlerstate.CancelWhen = func(c *Call, ctx context.Context) { c.setWatch(ctx) }
}
