package record

import "github.com/rpcd/rpcd/proto"

// conns follows what each recorded connection has going, so that a frame
// that belongs to a call, a stream or a subscription is recorded only when
// that call, stream or subscription was, and redacted by its route. It is
// the writer goroutine's (and Filter's) alone.
type conns struct {
	routes  []string          // Options.Routes
	drop    []string          // Filter.Drop
	all     bool              // every frame of the client's is recorded, none of the server's: nothing to follow
	answers bool              // Options.Answers
	intern  map[string]string // routes seen, so that tracking one allocates nothing
	m       map[uint64]*connTrack
}

// connTrack is one connection's calls, streams and subscriptions that are
// recorded, by id, with their routes.
type connTrack struct {
	calls   map[uint32]string // the client's Requests awaiting their answers
	streams map[uint32]stream // streams the client opened (odd ids)
	subs    map[uint32]string // the client's subscriptions, by their patterns
}

// stream is a recorded stream: its route, and which ends have ended.
type stream struct {
	route string
	ends  uint8 // 1: the client's StreamEnd came, 2: the server's
}

// maxInterned bounds the routes interned: past it a route is copied.
const maxInterned = 4096

func newConns(routes []string, answers bool) *conns {
	return &conns{routes: routes, answers: answers, intern: map[string]string{}, m: map[uint64]*connTrack{}}
}

// get returns conn's state, and whether it is new.
func (cs *conns) get(conn uint64) (*connTrack, bool) {
	if c := cs.m[conn]; c != nil {
		return c, false
	}
	c := &connTrack{calls: map[uint32]string{}, streams: map[uint32]stream{}, subs: map[uint32]string{}}
	cs.m[conn] = c
	return c, true
}

// str returns route as a string, interned.
func (cs *conns) str(route []byte) string {
	if s, ok := cs.intern[string(route)]; ok {
		return s
	}
	s := string(route)
	if len(cs.intern) < maxInterned {
		cs.intern[s] = s
	}
	return s
}

// decide says whether the frame with header h and route route, which the
// client sent (out false) or the server sent (out true) on c, is recorded;
// with its route (a call's, a stream's, a subscription's) and whether it
// starts something (a call, a stream, a subscription, a publish). It
// updates c as the frame says.
func (cs *conns) decide(c *connTrack, h *proto.Header, route []byte, out bool) (rec bool, rt string, starts bool) {
	id := h.ID
	if cs.all {
		switch h.Kind {
		case proto.KindRequest, proto.KindOneWay, proto.KindPublish, proto.KindSubscribe, proto.KindStreamOpen:
			return !out, "", !out
		}
		return !out, "", false
	}
	if !out {
		switch h.Kind {
		case proto.KindRequest, proto.KindOneWay, proto.KindPublish, proto.KindSubscribe, proto.KindStreamOpen:
			if !matchAny(cs.routes, route) || (len(cs.drop) > 0 && matchAny(cs.drop, route)) {
				return false, "", false
			}
			rt = cs.str(route)
			switch h.Kind {
			case proto.KindRequest:
				c.calls[id] = rt
			case proto.KindSubscribe:
				c.subs[id] = rt
			case proto.KindStreamOpen:
				c.streams[id] = stream{route: rt}
			}
			return true, rt, true
		case proto.KindCancel:
			rt, rec = c.calls[id]
		case proto.KindUnsubscribe:
			if rt, rec = c.subs[id]; rec {
				delete(c.subs, id)
			}
		case proto.KindStreamData, proto.KindStreamCredit, proto.KindStreamEnd, proto.KindStreamReset:
			rt, rec = c.streamFrame(h.Kind, id, 1)
		}
		return rec, rt, false
	}
	switch h.Kind {
	case proto.KindResponse, proto.KindError:
		if rt, rec = c.calls[id]; rec {
			delete(c.calls, id)
		}
	case proto.KindMessage:
		rt, rec = c.subs[id]
	case proto.KindUnsubscribe:
		delete(c.subs, id)
		return false, "", false
	case proto.KindStreamData, proto.KindStreamCredit, proto.KindStreamEnd, proto.KindStreamReset:
		rt, rec = c.streamFrame(h.Kind, id, 2)
	}
	return rec && cs.answers, rt, false
}

// streamFrame looks up the stream of a stream frame from end (1 the
// client, 2 the server) and forgets the stream once it is finished.
func (c *connTrack) streamFrame(k proto.Kind, id uint32, end uint8) (string, bool) {
	s, ok := c.streams[id]
	if !ok {
		return "", false
	}
	switch k {
	case proto.KindStreamReset:
		delete(c.streams, id)
	case proto.KindStreamEnd:
		if s.ends |= end; s.ends == 3 {
			delete(c.streams, id)
		} else {
			c.streams[id] = s
		}
	}
	return s.route, true
}

// userPayload reports whether frames of kind k carry the application's
// bytes, which redaction applies to; and how many bytes at their start are
// kept whatever the rule (an error body's code).
func userPayload(k proto.Kind) (bool, int) {
	switch k {
	case proto.KindRequest, proto.KindOneWay, proto.KindPublish, proto.KindResponse, proto.KindMessage, proto.KindStreamData:
		return true, 0
	case proto.KindError, proto.KindStreamReset:
		return true, 2
	}
	return false, 0
}
