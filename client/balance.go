package client

import (
	"context"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// Balance is how a Cluster spreads calls over its nodes.
type Balance int

const (
	// RoundRobin sends calls to the nodes in turn, each node Weight times
	// per round, interleaved.
	RoundRobin Balance = iota
	// LeastInflight sends each call to the node with the fewest calls in
	// flight from this client for its weight.
	LeastInflight
	// Hash sends calls with the same key to the same node for as long as
	// it is in the set (consistent hashing, each node holding a share of
	// the ring proportional to its weight): the key is
	// ServiceOptions.HashKey's, or WithAffinity's. Calls with no key go
	// round robin.
	Hash
)

// String returns the policy's name as the flags spell it.
func (b Balance) String() string {
	switch b {
	case RoundRobin:
		return "round-robin"
	case LeastInflight:
		return "least-inflight"
	case Hash:
		return "hash"
	}
	return "Balance(" + strconv.Itoa(int(b)) + ")"
}

// ParseBalance returns the policy String names.
func ParseBalance(s string) (Balance, bool) {
	for _, b := range []Balance{RoundRobin, LeastInflight, Hash} {
		if b.String() == s {
			return b, true
		}
	}
	return 0, false
}

// node is one member of a Cluster: its client and its counters.
type node struct {
	Node
	c        *Client
	inflight atomic.Int64  // calls from this cluster on it now
	calls    atomic.Uint64 // calls sent to it
	gone     atomic.Bool   // left the set: take no new calls

	// Its breaker (ServiceOptions.Ejection; eject nil: none). until is 0
	// while the breaker is closed; once it opens, the time on clock until
	// which the node gets no calls, and it stays set past that, while the
	// node is on trial, until a call succeeds.
	eject     *Ejection
	fails     atomic.Int32 // node failures in a row
	until     atomic.Int64
	ejections atomic.Int32 // in a row without a success
}

// clockStart is where clock counts from.
var clockStart = time.Now()

// clock is a monotonic clock in nanoseconds.
func clock() int64 { return int64(time.Since(clockStart)) }

// out reports whether n is ejected now. A node whose breaker is closed
// costs one atomic load.
func (n *node) out() bool {
	until := n.until.Load()
	return until != 0 && clock() < until
}

// record counts the outcome of a call sent to n in its breaker.
func (n *node) record(err error) {
	if n.eject == nil {
		return
	}
	if err == nil || !nodeFailure(err) {
		// A reply, or an error the node sent about the call, closes the
		// breaker; the caller's cancel tells nothing. A closed breaker is
		// only read, not written, on the way of a call that succeeds.
		if (err == nil || answered(err)) && (n.fails.Load() != 0 || n.until.Load() != 0) {
			n.fails.Store(0)
			n.until.Store(0)
			n.ejections.Store(0)
		}
		return
	}
	until := n.until.Load()
	switch {
	case until == 0: // closed: the Failures-th failure in a row opens it
		if int(n.fails.Add(1)) != n.eject.Failures {
			return
		}
	case clock() < until: // open: calls sent before it opened add nothing
		return
	}
	// Open it, or, on trial, open it again for twice as long as the last
	// time: 1, 2, 4, 8, 16 times Duration. Of failures that come together,
	// one does.
	k := min(n.ejections.Load(), 4)
	if !n.until.CompareAndSwap(until, clock()+int64(n.eject.Duration)<<k) {
		return
	}
	n.ejections.Add(1)
	n.fails.Store(0)
}

// answered reports whether err is an error a node sent about the call
// (not the caller's cancel, nor its deadline).
func answered(err error) bool {
	code := handler.CodeOf(err)
	return code != proto.CodeCanceled && code != proto.CodeDeadlineExceeded && code != proto.CodeUnknown
}

// nodeFailure reports whether err says a node failed a call sent to it,
// rather than the call or its caller: lost or refused (Unavailable),
// overloaded (ResourceExhausted), broken (Internal), or too slow once the
// call was sent (DeadlineExceeded, not Unprocessed).
func nodeFailure(err error) bool {
	switch handler.CodeOf(err) {
	case proto.CodeUnavailable, proto.CodeResourceExhausted, proto.CodeInternal:
		return true
	case proto.CodeDeadlineExceeded:
		return !handler.IsUnprocessed(err)
	}
	return false
}

// acquire counts a call on n; false if n has left the set, in which case
// the call must pick again. With Cluster.drain it guarantees that a node is
// closed only once no call that picked it is still on it.
func (n *node) acquire() bool {
	n.inflight.Add(1)
	if n.gone.Load() {
		n.inflight.Add(-1)
		return false
	}
	n.calls.Add(1)
	return true
}

func (n *node) release() { n.inflight.Add(-1) }

// table is an immutable picture of a cluster's nodes, swapped whole on each
// change: picking reads it without a lock.
type table struct {
	nodes   []*node
	weights []int64     // the nodes' weights when the table was built
	seq     []uint16    // round robin: node indices, each Weight times, interleaved
	ring    []ringPoint // hash: points sorted by hash
	next    atomic.Uint32
}

// ringPoint is one of a node's points on the hash ring.
type ringPoint struct {
	hash uint64
	node uint16
}

// pointsPerWeight is how many ring points a node gets per unit of weight.
const pointsPerWeight = 64

func newTable(nodes []*node, b Balance) *table {
	t := &table{nodes: nodes, weights: make([]int64, len(nodes))}
	if len(nodes) == 0 {
		return t
	}
	for j, n := range nodes {
		t.weights[j] = int64(n.weight())
	}
	// Smooth weighted round robin (as nginx's): the sequence spreads each
	// node's turns over the round instead of giving them in a row.
	total := 0
	cur := make([]int, len(nodes))
	for _, n := range nodes {
		total += n.weight()
	}
	t.seq = make([]uint16, total)
	for i := range t.seq {
		best := 0
		for j, n := range nodes {
			cur[j] += n.weight()
			if cur[j] > cur[best] {
				best = j
			}
		}
		cur[best] -= total
		t.seq[i] = uint16(best)
	}
	if b == Hash {
		for j, n := range nodes {
			for p := range n.weight() * pointsPerWeight {
				t.ring = append(t.ring, ringPoint{hash: hashString(n.Addr + "#" + strconv.Itoa(p)), node: uint16(j)})
			}
		}
		slices.SortFunc(t.ring, func(a, b ringPoint) int {
			switch {
			case a.hash < b.hash:
				return -1
			case a.hash > b.hash:
				return 1
			}
			return 0
		})
	}
	return t
}

// hashString is FNV-1a with a final mix, the same in every process, so
// that clients of one service agree on where a key goes.
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	// splitmix64's finaliser: FNV alone clusters short, similar keys.
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// pick returns a usable node for a call, not avoid if another is usable,
// and not an ejected one if another is usable, or nil. It takes no lock:
// the table is immutable and the counters atomic.
func (t *table) pick(b Balance, key string, hasKey bool, avoid *node) *node {
	return t.pickFrom(b, key, hasKey, avoid, true)
}

// pickFrom is pick; with advance false it starts where the last pick did
// without taking a turn of round robin (for a call's copy: its first
// attempt took the turn).
func (t *table) pickFrom(b Balance, key string, hasKey bool, avoid *node, advance bool) *node {
	n := len(t.nodes)
	if n == 0 {
		return nil
	}
	switch {
	case b == Hash && hasKey:
		h := hashString(key)
		i, _ := slices.BinarySearchFunc(t.ring, h, func(p ringPoint, h uint64) int {
			switch {
			case p.hash < h:
				return -1
			case p.hash > h:
				return 1
			}
			return 0
		})
		// The key's node, or, if it is down, the next distinct nodes
		// along the ring: keys of a dead node spread, others stay put.
		return firstUsable(len(t.ring), func(k int) *node { return t.nodes[t.ring[(i+k)%len(t.ring)].node] }, avoid)
	case b == LeastInflight:
		start := t.start(advance)
		var best, ejected *node
		var bestLoad, bestWeight int64
		for k := range n {
			j := (start + k) % n
			nd := t.nodes[j]
			if nd == avoid || !nd.c.usable() {
				continue
			}
			if nd.out() {
				if ejected == nil {
					ejected = nd
				}
				continue
			}
			load, w := nd.inflight.Load(), t.weights[j]
			if best == nil || load*bestWeight < bestLoad*w {
				best, bestLoad, bestWeight = nd, load, w
			}
		}
		switch {
		case best != nil:
			return best
		case avoid != nil && avoid.c.usable() && !avoid.out():
			return avoid
		case ejected != nil:
			return ejected
		case avoid != nil && avoid.c.usable():
			return avoid
		}
		return nil
	}
	start := t.start(advance)
	return firstUsable(len(t.seq), func(k int) *node { return t.nodes[t.seq[(start+k)%len(t.seq)]] }, avoid)
}

// start is where a pick begins: the next turn, or with advance false the
// last one again.
func (t *table) start(advance bool) int {
	if advance {
		return int(t.next.Add(1))
	}
	return int(t.next.Load())
}

// firstUsable returns the first usable node of count, in the order at
// gives them: not avoid, and not an ejected node, unless no other is
// usable; then avoid before an ejected one, and an ejected one before an
// ejected avoid.
func firstUsable(count int, at func(k int) *node, avoid *node) *node {
	var fallback [3]*node // avoid; an ejected node; avoid, ejected
	for k := range count {
		nd := at(k)
		if !nd.c.usable() {
			continue
		}
		out := nd.out()
		switch {
		case nd != avoid && !out:
			return nd
		case nd == avoid && !out:
			fallback[0] = nd
		case nd != avoid:
			if fallback[1] == nil {
				fallback[1] = nd
			}
		default:
			fallback[2] = nd
		}
	}
	for _, nd := range fallback {
		if nd != nil {
			return nd
		}
	}
	return nil
}

type affinityKey struct{}

// WithAffinity returns a context whose calls through a Cluster balanced
// by Hash go to the node that key hashes to, as long as it is up.
func WithAffinity(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, affinityKey{}, key)
}

// affinityFrom returns the key WithAffinity set on ctx.
func affinityFrom(ctx context.Context) (string, bool) {
	k, ok := ctx.Value(affinityKey{}).(string)
	return k, ok
}
