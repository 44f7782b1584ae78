package handlerstate

import (
	"reflect"
	"sync"
	"sync/atomic"
)

// Route is a registered route's state beside its handler: how it was
// registered, its Go types if it is typed, and what it measures of its
// inline runs. The copies of a handler.Route that Registry.Use makes share
// one Route.
type Route struct {
	Pinned bool         // registered with handler.Inline: never moved to the pool
	Arg    reflect.Type // a typed route's argument (handler.Func's Req); nil for a raw route
	Reply  reflect.Type // a typed route's reply (handler.Func's Resp); nil for a raw route

	Moved    atomic.Bool   // runs on the blocking pool: its inline runs kept passing their budget (handler/transport)
	Runs     atomic.Uint32 // its last timed inline runs, the newest in bit 0: 1 for a run over budget
	Overruns atomic.Uint64 // inline runs a watchdog saw pass its threshold
	Logged   atomic.Bool   // the first overrun has been logged, with a stack

	described sync.Once
	shapes    any // what Shapes derived
}

// Shapes returns what derive returns, derived on the first call and kept
// for the later ones: handler/schema keeps a typed route's schemas here,
// so that they are derived on the route's first description, once.
func (r *Route) Shapes(derive func() any) any {
	r.described.Do(func() { r.shapes = derive() })
	return r.shapes
}

// StreamKey is the context key a stream handler's stream travels under,
// from transport.WithStream to handler.StreamFrom.
type StreamKey struct{}

// The accessors package handler sets in its init.
var (
	// RouteOf returns the state of a route: a
	// func(*handler.Route) *Route.
	RouteOf any

	// IsReceived reports whether an error was returned by a call that a
	// client or a Peer made (transport.Received): a
	// func(*handler.Error) bool.
	IsReceived any

	// MarkReceived returns an Unprocessed error so marked, a copy unless
	// it is marked already: a func(*handler.Error) *handler.Error.
	MarkReceived any

	// CancelWhen makes the end of a context cancel a started Call, until
	// its End (transport.CancelWhen): a
	// func(*handler.Call, context.Context).
	CancelWhen any
)
