package engine

import (
	"sync"
	"sync/atomic"
)

// Calls is the table of the calls this end made on one connection that
// wait for their answers, by call id: it gives each call its id and hands
// it to whoever takes it out (the reader on its answer, the connection on
// failure, the caller whose context ended), who completes it, once. T is
// the side's own record of a call. Once closed, it takes no call.
//
// The table is spread over shards, each with its own lock, so that many
// callers and the reader rarely meet on one; a shard holds its calls in a
// ring, with a map only for a call whose ring place is still taken. Call
// ids are handed out in order, so a shard's next call takes the ring place
// of the call shards*callRing ids before it, long answered unless that one
// is slow. Adding and taking calls, maps and locks together, were about a
// tenth of a multiplexing client's CPU (docs/performance.md); the ring
// takes the maps' hashing away.
type Calls[T any] struct {
	next    atomic.Uint32
	closed  atomic.Bool
	wrapped atomic.Bool // next has passed 0: an id handed out may be one still held outside (Reserve)
	mask    uint32
	shards  []callShard[T]       // one's, for a table of one shard
	one     [1]callShard[T]      // a table of one shard in itself: no pointer to chase on every call
	skip    func(id uint32) bool // SetSkip's; looked at only once the ids have wrapped
}

// callRing is how many calls a shard holds without a map.
const callRing = 16

type callShard[T any] struct {
	// The lock, count and map first: with the table's own fields before
	// them, a one-shard table's every call touches one line and a ring
	// place.
	mu      sync.Mutex
	n       int32                  // calls held
	waiting atomic.Bool            // n > 0, for Waiting, which takes no lock: stored only as n leaves or comes back to 0
	more    map[uint32]*T          // calls whose ring place was taken when they came
	ring    [callRing]callEntry[T] // a call with id in place (id/shards)%callRing
	_       [40]byte               // keep shards on separate cache lines
}

type callEntry[T any] struct {
	id uint32
	c  *T
}

// NewCalls returns an empty table of shards shards, a power of two: a
// client that many callers share wants several (32); a connection that
// makes a call now and then, one.
func NewCalls[T any](shards int) *Calls[T] {
	t := new(Calls[T])
	t.Init(shards)
	return t
}

// Init makes t, a zero Calls that is never copied after (a field of its
// owner's), an empty table of shards shards, as NewCalls does.
func (t *Calls[T]) Init(shards int) {
	if shards < 1 || shards&(shards-1) != 0 {
		panic("rpcd: engine: shards must be a power of two")
	}
	t.mask = uint32(shards - 1)
	if shards == 1 {
		t.shards = t.one[:]
	} else {
		t.shards = make([]callShard[T], shards)
	}
}

func (t *Calls[T]) shard(id uint32) *callShard[T] { return &t.shards[id&t.mask] }

// place returns id's place in its shard's ring.
func (t *Calls[T]) place(s *callShard[T], id uint32) *callEntry[T] {
	return &s.ring[(id/(t.mask+1))%callRing]
}

// get returns the call with id, nil if none waits; with s.mu held.
func (t *Calls[T]) get(s *callShard[T], id uint32) *T {
	if e := t.place(s, id); e.c != nil && e.id == id {
		return e.c
	}
	if len(s.more) == 0 {
		return nil
	}
	return s.more[id]
}

// remove takes the call c with id, which s holds, out; with s.mu held.
func (t *Calls[T]) remove(s *callShard[T], id uint32, c *T) {
	if e := t.place(s, id); e.c == c && e.id == id {
		*e = callEntry[T]{}
	} else {
		delete(s.more, id)
	}
	if s.n--; s.n == 0 {
		s.waiting.Store(false)
	}
}

// Add gives c an id no waiting call has, stores it in *idp (c's own
// field: under the shard's lock, before anyone who takes c out can look),
// enters c and returns the id; 0 if the table is closed. Once Add returns,
// c may be taken and completed by another goroutine at any moment.
func (t *Calls[T]) Add(c *T, idp *uint32) uint32 {
	for {
		id := t.newID()
		s := t.shard(id)
		s.mu.Lock()
		if t.closed.Load() {
			s.mu.Unlock()
			return 0
		}
		if t.get(s, id) != nil {
			s.mu.Unlock()
			continue // a call 2^32 ids old still waits; take the next id
		}
		*idp = id
		if e := t.place(s, id); e.c == nil {
			*e = callEntry[T]{id, c}
		} else {
			if s.more == nil {
				s.more = make(map[uint32]*T)
			}
			s.more[id] = c
		}
		if s.n++; s.n == 1 {
			s.waiting.Store(true)
		}
		s.mu.Unlock()
		return id
	}
}

// newID returns the next id, never 0, which names the connection itself,
// nor, once the ids have wrapped, one skip reports held outside the table.
func (t *Calls[T]) newID() uint32 {
	for {
		id := t.next.Add(1)
		if id == 0 {
			t.wrapped.Store(true)
			continue
		}
		if t.wrapped.Load() && t.skip != nil && t.skip(id) {
			continue
		}
		return id
	}
}

// Reserve hands out n consecutive ids, none 0, in the order Add hands
// them out, for calls whose owner keeps them outside the table (a client's
// Pipe), and returns the first. A call id must not be used twice at once,
// so the table must skip such an id once the ids have wrapped (SetSkip),
// and the owner must skip one the table holds then (Wrapped, Holds).
func (t *Calls[T]) Reserve(n uint32) uint32 {
	for {
		end := t.next.Add(n)
		if first := end - n + 1; first != 0 && first <= end {
			return first
		}
		t.wrapped.Store(true) // the block ran through 0: take the next
	}
}

// SetSkip has the table skip, once the ids have wrapped, every id for
// which skip reports true: the ids of calls held outside it (Reserve).
// skip must not wait for a lock held while a call is added. Set it before
// the table is used.
func (t *Calls[T]) SetSkip(skip func(id uint32) bool) { t.skip = skip }

// Wrapped reports whether the ids have wrapped: an id handed out may then
// be one a call waits with.
func (t *Calls[T]) Wrapped() bool { return t.wrapped.Load() }

// Holds reports whether a call with id waits in the table.
func (t *Calls[T]) Holds(id uint32) bool {
	s := t.shard(id)
	if !s.waiting.Load() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return t.get(s, id) != nil
}

// FreeID returns an id for a one-way call, which waits for no answer: one
// no waiting call has.
func (t *Calls[T]) FreeID() uint32 {
	for {
		id := t.newID()
		s := t.shard(id)
		s.mu.Lock()
		busy := t.get(s, id) != nil
		s.mu.Unlock()
		if !busy {
			return id
		}
	}
}

// Take removes and returns the call with id; nil if none waits.
func (t *Calls[T]) Take(id uint32) *T {
	s := t.shard(id)
	s.mu.Lock()
	c := t.get(s, id)
	if c != nil {
		t.remove(s, id, c)
	}
	s.mu.Unlock()
	return c
}

// Forget removes c, entered with id, if it still waits, and reports
// whether it did: its completion is then the caller's.
func (t *Calls[T]) Forget(id uint32, c *T) bool {
	s := t.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.get(s, id) == c {
		t.remove(s, id, c)
		return true
	}
	return false
}

// each calls f on every waiting call, with its shard's lock held.
func (t *Calls[T]) each(f func(s *callShard[T], id uint32, c *T)) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for _, e := range s.ring {
			if e.c != nil {
				f(s, e.id, e.c)
			}
		}
		for id, c := range s.more {
			f(s, id, c)
		}
		s.mu.Unlock()
	}
}

// TakeIf removes and returns the calls for which match is true, by id:
// the ids the table gave them, which their records may not hold yet.
func (t *Calls[T]) TakeIf(match func(*T) bool) map[uint32]*T {
	var out map[uint32]*T
	t.each(func(s *callShard[T], id uint32, c *T) {
		if match(c) {
			t.remove(s, id, c) // deleting from a map being ranged over is allowed
			if out == nil {
				out = make(map[uint32]*T)
			}
			out[id] = c
		}
	})
	return out
}

// Len returns the number of waiting calls.
func (t *Calls[T]) Len() int {
	n := 0
	t.each(func(*callShard[T], uint32, *T) { n++ })
	return n
}

// Waiting reports whether any call waits, without taking a lock. A call
// added before this is seen: its shard's flag was set before Add returned.
func (t *Calls[T]) Waiting() bool {
	for i := range t.shards {
		if t.shards[i].waiting.Load() {
			return true
		}
	}
	return false
}

// Close closes the table and returns the calls that were waiting, by id.
// A call added concurrently is either among them or refused.
func (t *Calls[T]) Close() map[uint32]*T {
	t.closed.Store(true)
	all := make(map[uint32]*T)
	t.each(func(s *callShard[T], id uint32, c *T) {
		all[id] = c
		t.remove(s, id, c)
	})
	return all
}
