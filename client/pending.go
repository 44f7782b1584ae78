package client

import (
	"sync"
	"sync/atomic"
)

// pendingShards spreads the calls waiting on one connection over locks, so
// that many callers and the reader rarely meet on one.
const pendingShards = 32

// pendingRing is how many calls a shard holds without a map. Call ids are
// handed out in order, so a shard's next call takes the ring place of the
// call pendingShards*pendingRing ids before it, long answered unless that
// one is slow: only then does the newer call go to the shard's map.
// Adding and taking calls, maps and locks together, were about a tenth of
// a multiplexing client's CPU (docs/performance.md); the ring takes the
// maps' hashing away.
const pendingRing = 16

// pendingTable holds a connection's calls waiting for replies, by call id.
// Once closed, it takes no call.
type pendingTable struct {
	next   atomic.Uint32
	closed atomic.Bool
	shards [pendingShards]pendingShard
}

type pendingShard struct {
	mu   sync.Mutex
	ring [pendingRing]*call // a call with id in place (id/pendingShards)%pendingRing
	more map[uint32]*call   // calls whose ring place was taken when they came
	n    atomic.Int32       // calls held, for waiting, which takes no lock
	_    [44]byte           // keep shards on separate cache lines
}

func (t *pendingTable) shard(id uint32) *pendingShard { return &t.shards[id%pendingShards] }

// place returns id's place in its shard's ring.
func (s *pendingShard) place(id uint32) **call { return &s.ring[id/pendingShards%pendingRing] }

// get returns the call with id, nil if none waits; with s.mu held.
func (s *pendingShard) get(id uint32) *call {
	if cl := *s.place(id); cl != nil && cl.id == id {
		return cl
	}
	if len(s.more) == 0 {
		return nil
	}
	return s.more[id]
}

// remove takes cl, which s holds, out; with s.mu held.
func (s *pendingShard) remove(cl *call) {
	if p := s.place(cl.id); *p == cl {
		*p = nil
	} else {
		delete(s.more, cl.id)
	}
	s.n.Add(-1)
}

// add gives cl an id no waiting call has, and enters it. It returns false
// if the table is closed.
func (t *pendingTable) add(cl *call) bool {
	for {
		id := t.newID()
		s := t.shard(id)
		s.mu.Lock()
		if t.closed.Load() {
			s.mu.Unlock()
			return false
		}
		if s.get(id) != nil {
			s.mu.Unlock()
			continue // a call 2^32 ids old still waits; take the next id
		}
		cl.id = id
		if p := s.place(id); *p == nil {
			*p = cl
		} else {
			if s.more == nil {
				s.more = make(map[uint32]*call)
			}
			s.more[id] = cl
		}
		s.n.Add(1)
		s.mu.Unlock()
		return true
	}
}

// newID returns the next id, never 0, which names the connection itself.
func (t *pendingTable) newID() uint32 {
	for {
		if id := t.next.Add(1); id != 0 {
			return id
		}
	}
}

// freeID returns an id for a one-way call: one no waiting call has.
func (t *pendingTable) freeID() uint32 {
	for {
		id := t.newID()
		s := t.shard(id)
		s.mu.Lock()
		busy := s.get(id) != nil
		s.mu.Unlock()
		if !busy {
			return id
		}
	}
}

// take removes and returns the call with id; nil if none waits.
func (t *pendingTable) take(id uint32) *call {
	s := t.shard(id)
	s.mu.Lock()
	cl := s.get(id)
	if cl != nil {
		s.remove(cl)
	}
	s.mu.Unlock()
	return cl
}

// forget removes cl if it still waits and reports whether it did.
func (t *pendingTable) forget(cl *call) bool {
	s := t.shard(cl.id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.get(cl.id) == cl {
		s.remove(cl)
		return true
	}
	return false
}

// each calls f on every waiting call, with its shard's lock held.
func (t *pendingTable) each(f func(s *pendingShard, cl *call)) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for _, cl := range s.ring {
			if cl != nil {
				f(s, cl)
			}
		}
		for _, cl := range s.more {
			f(s, cl)
		}
		s.mu.Unlock()
	}
}

// takeIf removes and returns the calls for which match is true.
func (t *pendingTable) takeIf(match func(*call) bool) []*call {
	var out []*call
	t.each(func(s *pendingShard, cl *call) {
		if match(cl) {
			s.remove(cl) // deleting from a map being ranged over is allowed
			out = append(out, cl)
		}
	})
	return out
}

// len returns the number of waiting calls.
func (t *pendingTable) len() int {
	n := 0
	t.each(func(*pendingShard, *call) { n++ })
	return n
}

// waiting reports whether any call waits, without taking a lock. A call
// added before this is seen: its count is stored before the caller goes on.
func (t *pendingTable) waiting() bool {
	for i := range t.shards {
		if t.shards[i].n.Load() != 0 {
			return true
		}
	}
	return false
}

// close closes the table and returns the calls that were waiting. A call
// added concurrently is either among them or refused.
func (t *pendingTable) close() map[uint32]*call {
	t.closed.Store(true)
	all := make(map[uint32]*call)
	t.each(func(s *pendingShard, cl *call) {
		all[cl.id] = cl
		s.remove(cl)
	})
	return all
}
