package client

import (
	"sync"
	"sync/atomic"
)

// pendingShards spreads the calls waiting on one connection over locks, so
// that many callers and the reader rarely meet on one.
const pendingShards = 32

// pendingTable holds a connection's calls waiting for replies, by call id.
// Once closed, it takes no call.
type pendingTable struct {
	next   atomic.Uint32
	closed atomic.Bool
	shards [pendingShards]pendingShard
}

type pendingShard struct {
	mu    sync.Mutex
	calls map[uint32]*call
	n     atomic.Int32 // len(calls), for waiting, which takes no lock
	_     [44]byte     // keep shards on separate cache lines
}

func (t *pendingTable) shard(id uint32) *pendingShard { return &t.shards[id%pendingShards] }

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
		if _, busy := s.calls[id]; busy {
			s.mu.Unlock()
			continue // a call 2^32 ids old still waits; take the next id
		}
		if s.calls == nil {
			s.calls = make(map[uint32]*call)
		}
		cl.id = id
		s.calls[id] = cl
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
		_, busy := s.calls[id]
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
	cl := s.calls[id]
	if cl != nil {
		delete(s.calls, id)
		s.n.Add(-1)
	}
	s.mu.Unlock()
	return cl
}

// forget removes cl if it still waits and reports whether it did.
func (t *pendingTable) forget(cl *call) bool {
	s := t.shard(cl.id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls[cl.id] == cl {
		delete(s.calls, cl.id)
		s.n.Add(-1)
		return true
	}
	return false
}

// takeIf removes and returns the calls for which match is true.
func (t *pendingTable) takeIf(match func(*call) bool) []*call {
	var out []*call
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for id, cl := range s.calls {
			if match(cl) {
				delete(s.calls, id)
				s.n.Add(-1)
				out = append(out, cl)
			}
		}
		s.mu.Unlock()
	}
	return out
}

// len returns the number of waiting calls.
func (t *pendingTable) len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += len(s.calls)
		s.mu.Unlock()
	}
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
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for id, cl := range s.calls {
			all[id] = cl
		}
		s.calls = nil
		s.n.Store(0)
		s.mu.Unlock()
	}
	return all
}
