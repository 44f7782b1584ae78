package record

import (
	"math/bits"

	"github.com/rpcd/rpcd/proto"
)

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
	route   string            // the route str returned last
	m       map[uint64]*connTrack
	last    *connTrack // m[lastID], or nil: a connection's frames come in runs
	lastID  uint64
}

// connTrack is one connection's calls, streams and subscriptions that are
// recorded, by id, with their routes.
type connTrack struct {
	calls   callTable         // the client's Requests awaiting their answers
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
	if cs.last != nil && cs.lastID == conn {
		return cs.last, false
	}
	c := cs.m[conn]
	fresh := c == nil
	if fresh {
		c = &connTrack{streams: map[uint32]stream{}, subs: map[uint32]string{}}
		cs.m[conn] = c
	}
	cs.last, cs.lastID = c, conn
	return c, fresh
}

// forget drops conn's state, and reports whether it had one.
func (cs *conns) forget(conn uint64) bool {
	if cs.lastID == conn {
		cs.last = nil
	}
	if _, ok := cs.m[conn]; !ok {
		return false
	}
	delete(cs.m, conn)
	return true
}

// str returns route as a string, interned.
func (cs *conns) str(route []byte) string {
	if string(route) == cs.route {
		return cs.route
	}
	s, ok := cs.intern[string(route)]
	if !ok {
		s = string(route)
		if len(cs.intern) < maxInterned {
			cs.intern[s] = s
		}
	}
	cs.route = s
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
				c.calls.put(id, rt)
			case proto.KindSubscribe:
				c.subs[id] = rt
			case proto.KindStreamOpen:
				c.streams[id] = stream{route: rt}
			}
			return true, rt, true
		case proto.KindCancel:
			rt, rec = c.calls.get(id)
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
		rt, rec = c.calls.take(id)
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

// callTable maps the ids of a connection's calls awaiting their answers to
// their routes: open addressing with linear probing, and deletion by
// shifting back the entries after the one deleted, so that the steady
// churn of a connection's calls neither allocates nor leaves tombstones to
// probe past. The zero callTable is empty.
type callTable struct {
	slots []callSlot // a power of two of them, at most 3/4 used
	n     int
	shift uint8 // 32 - log2(len(slots))
}

type callSlot struct {
	used  bool
	id    uint32
	route string
}

// home is where id's probe starts: Fibonacci hashing, which spreads the
// consecutive ids clients give.
func (t *callTable) home(id uint32) int { return int((id * 0x9e3779b1) >> t.shift) }

// find returns the slot holding id, or the free slot where its probe ends.
func (t *callTable) find(id uint32) int {
	mask := len(t.slots) - 1
	i := t.home(id)
	for t.slots[i].used && t.slots[i].id != id {
		i = (i + 1) & mask
	}
	return i
}

// get returns id's route.
func (t *callTable) get(id uint32) (string, bool) {
	if t.n == 0 {
		return "", false
	}
	s := &t.slots[t.find(id)]
	return s.route, s.used
}

// put sets id's route.
func (t *callTable) put(id uint32, route string) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	i := t.find(id)
	if !t.slots[i].used {
		t.n++
	}
	t.slots[i] = callSlot{used: true, id: id, route: route}
}

// take removes id, returning its route.
func (t *callTable) take(id uint32) (string, bool) {
	if t.n == 0 {
		return "", false
	}
	i := t.find(id)
	if !t.slots[i].used {
		return "", false
	}
	route := t.slots[i].route
	mask := len(t.slots) - 1
	// Move back each entry after i, up to the next free slot, whose probe
	// would pass i: then no probe meets a hole before its entry.
	for j := (i + 1) & mask; t.slots[j].used; j = (j + 1) & mask {
		if h := t.home(t.slots[j].id); (j-h)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = callSlot{}
	t.n--
	return route, true
}

// grow doubles the table (16 slots at first).
func (t *callTable) grow() {
	old := t.slots
	size := max(16, 2*len(old))
	t.slots, t.n, t.shift = make([]callSlot, size), 0, uint8(32-bits.TrailingZeros(uint(size)))
	for _, s := range old {
		if s.used {
			t.put(s.id, s.route)
		}
	}
}
