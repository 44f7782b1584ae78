package handler

import "sort"

// The kinds of route a Description names.
const (
	KindTyped  = "typed"  // Func (or Method): a Go argument and reply, in JSON or a registered codec
	KindRaw    = "raw"    // bytes in, bytes out, in the Request's codec
	KindStream = "stream" // HandleStream: bytes both ways on a stream
)

// Description says what a route takes and answers: the route, its kind,
// where it runs, and for a typed route the JSON Schemas of its argument
// and its reply, derived from its Go types (ArgumentSchema, ReplySchema).
// It is what Sys/Describe answers (docs/protocol.md, "The routes of rpcd
// serve"). The schemas are shared: do not change them.
type Description struct {
	Name     string  `json:"name"`
	Kind     string  `json:"kind"`               // KindTyped, KindRaw or KindStream
	Blocking bool    `json:"blocking,omitempty"` // runs on the blocking pool, as RouteInfo says
	Inline   bool    `json:"inline,omitempty"`   // pinned to the event loop (registered with Inline)
	Argument *Schema `json:"argument,omitempty"` // a typed route's argument
	Reply    *Schema `json:"reply,omitempty"`    // a typed route's reply
}

// shaper is a handler that knows the Go types of its argument and reply:
// Func's.
type shaper interface {
	shapes() (arg, reply *Schema)
}

// Describe returns the description of route, a call route or a stream
// route, and whether there is one. A typed route's schemas are derived on
// its first description and kept. The registry's middleware (Use) does not
// change a route's shapes; a route registered with a Handler that wraps a
// Func of its own is described as raw.
func (r *Registry) Describe(route string) (Description, bool) {
	if rt := (*r.routes.Load())[route]; rt != nil {
		return rt.describe(), true
	}
	if r.LookupStream([]byte(route)) != nil {
		return Description{Name: route, Kind: KindStream}, true
	}
	return Description{}, false
}

// Descriptions describes every route, stream routes among them, sorted by
// name.
func (r *Registry) Descriptions() []Description {
	m := *r.routes.Load()
	out := make([]Description, 0, len(m))
	for _, rt := range m {
		out = append(out, rt.describe())
	}
	for _, name := range r.StreamRoutes() {
		out = append(out, Description{Name: name, Kind: KindStream})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// describe returns rt's description.
func (rt *Route) describe() Description {
	d := Description{Name: rt.name, Kind: KindRaw, Blocking: rt.IsBlocking(), Inline: rt.pinned}
	if s, ok := rt.base.(shaper); ok {
		d.Kind = KindTyped
		d.Argument, d.Reply = s.shapes()
	}
	return d
}
