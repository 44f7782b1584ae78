package schema

import (
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/handlerstate"
)

// The kinds of route a Description names.
const (
	KindTyped  = "typed"  // handler.Func (or handler.Method): a Go argument and reply, in JSON or a registered codec
	KindRaw    = "raw"    // bytes in, bytes out, in the Request's codec
	KindStream = "stream" // Registry.HandleStream: bytes both ways on a stream
)

// Description says what a route takes and answers: the route, its kind,
// where it runs, and for a typed route the JSON Schemas of its argument
// and its reply, derived from its Go types (Argument, Reply). It is what
// Sys/Describe answers (docs/protocol.md, "The routes of rpcd serve"). The
// schemas are shared: do not change them.
type Description struct {
	Name     string  `json:"name"`
	Kind     string  `json:"kind"`               // KindTyped, KindRaw or KindStream
	Blocking bool    `json:"blocking,omitempty"` // runs on the blocking pool, as handler.RouteInfo says
	Inline   bool    `json:"inline,omitempty"`   // pinned to the event loop (registered with handler.Inline)
	Argument *Schema `json:"argument,omitempty"` // a typed route's argument
	Reply    *Schema `json:"reply,omitempty"`    // a typed route's reply
}

// routeState returns what handler keeps of a route beside its handler.
var routeState = handlerstate.RouteOf.(func(*handler.Route) *handlerstate.Route)

// Describe returns the description of route in reg, a call route or a
// stream route, and whether there is one. A typed route's schemas are
// derived on its first description and kept. The registry's middleware
// (Use) does not change a route's shapes; a route registered with a
// Handler that wraps a Func of its own is described as raw.
func Describe(reg *handler.Registry, route string) (Description, bool) {
	if rt := reg.Lookup([]byte(route)); rt != nil {
		return describe(rt), true
	}
	if reg.LookupStream([]byte(route)) != nil {
		return Description{Name: route, Kind: KindStream}, true
	}
	return Description{}, false
}

// Descriptions describes every route of reg, stream routes among them,
// sorted by name.
func Descriptions(reg *handler.Registry) []Description {
	routes := reg.Routes()
	out := make([]Description, 0, len(routes))
	for _, info := range routes {
		if info.Stream {
			out = append(out, Description{Name: info.Name, Kind: KindStream})
			continue
		}
		if rt := reg.Lookup([]byte(info.Name)); rt != nil {
			out = append(out, describe(rt))
		}
	}
	return out
}

// shapes are a typed route's schemas, kept in its state.
type shapes struct{ arg, reply *Schema }

// describe returns rt's description.
func describe(rt *handler.Route) Description {
	st := routeState(rt)
	d := Description{Name: rt.Name(), Kind: KindRaw, Blocking: rt.IsBlocking(), Inline: st.Pinned}
	if st.Arg != nil {
		s := st.Shapes(func() any { return shapes{Argument(st.Arg), Reply(st.Reply)} }).(shapes)
		d.Kind, d.Argument, d.Reply = KindTyped, s.arg, s.reply
	}
	return d
}
