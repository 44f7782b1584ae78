package client

import (
	"context"
	"slices"
	"strconv"
	"sync"
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

	budget *retryBudget // the cluster's (ServiceOptions.RetryBudget); nil: none

	// notServing is set while the node's health checks say it does not
	// serve (ServiceOptions.HealthCheck).
	notServing atomic.Bool

	// lacking holds the routes the node answered NotFound, Unprocessed, for
	// (it has no such route), each with the time on clock until which it
	// gets no calls to it; nil for none. Written under lackMu, copied.
	lacking atomic.Pointer[map[string]int64]
	lackMu  sync.Mutex
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

// unfit reports whether n should get calls only when no other node can:
// it is ejected, or its health checks say it does not serve.
func (n *node) unfit() bool { return n.notServing.Load() || n.out() }

// record counts the outcome of a call sent to n in its breaker, and a
// success in the cluster's retry budget.
func (n *node) record(err error) {
	if err == nil && n.budget != nil {
		n.budget.succeeded()
	}
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

// fresh makes n as a node that just joined: its breaker closed, its
// health and its routes trusted again (it registered afresh).
func (n *node) fresh() {
	n.fails.Store(0)
	n.until.Store(0)
	n.ejections.Store(0)
	n.notServing.Store(false)
	n.lackMu.Lock()
	n.lacking.Store(nil)
	n.lackMu.Unlock()
}

// lackingFor is how long a node that answered that it has no route gets
// no calls to that route (unless no other node can take them), or until
// it registers afresh.
const lackingFor = time.Minute

// misrouted reports whether err is a node's answer that it has no such
// route and did not run the call: NotFound, Unprocessed.
func misrouted(err error) bool {
	return handler.CodeOf(err) == proto.CodeNotFound && handler.IsUnprocessed(err)
}

// lacks reports whether n answered lately that it has no route.
func (n *node) lacks(route string) bool {
	p := n.lacking.Load()
	if p == nil {
		return false
	}
	until, ok := (*p)[route]
	return ok && clock() < until
}

// noteMisrouted marks route as one n lacks if err says so.
func (n *node) noteMisrouted(route string, err error) {
	if err == nil || !misrouted(err) || n.lacks(route) {
		return
	}
	n.lackMu.Lock()
	defer n.lackMu.Unlock()
	now := clock()
	m := map[string]int64{route: now + int64(lackingFor)}
	if old := n.lacking.Load(); old != nil {
		for r, until := range *old {
			if until > now && r != route {
				m[r] = until
			}
		}
	}
	n.lacking.Store(&m)
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
	weights []int64               // the nodes' weights when the table was built
	routes  []map[string]struct{} // the routes each node publishes; nil: every route
	all     rotation              // every node
	ring    []ringPoint           // hash: points sorted by hash

	// With ServiceOptions.Zone, when some nodes are in the zone and some
	// are not: the two rotations, which nodes are local, and the count
	// that spreads the calls that spill out of the zone. Nil otherwise.
	local, remote *rotation
	isLocal       []bool
	spill         atomic.Uint64
}

// rotation is round robin over some of a table's nodes.
type rotation struct {
	members []uint16 // their indices in the table
	seq     []uint16 // node indices, each Weight times, interleaved
	next    atomic.Uint32
	skip    atomic.Uint32 // spreads the turns of nodes that cannot take them
}

// ringPoint is one of a node's points on the hash ring.
type ringPoint struct {
	hash uint64
	node uint16
}

// pointsPerWeight is how many ring points a node gets per unit of weight.
const pointsPerWeight = 64

func newTable(nodes []*node, b Balance, zone string) *table {
	t := &table{nodes: nodes, weights: make([]int64, len(nodes)), routes: make([]map[string]struct{}, len(nodes))}
	if len(nodes) == 0 {
		return t
	}
	all := make([]uint16, len(nodes))
	var local, remote []uint16
	for j, n := range nodes {
		t.weights[j] = int64(n.weight())
		all[j] = uint16(j)
		if len(n.Routes) > 0 {
			t.routes[j] = make(map[string]struct{}, len(n.Routes))
			for _, r := range n.Routes {
				t.routes[j][r] = struct{}{}
			}
		}
		if zone != "" && n.Meta[ZoneKey] == zone {
			local = append(local, uint16(j))
		} else {
			remote = append(remote, uint16(j))
		}
	}
	t.all.init(all, t.weights)
	if zone != "" && len(local) > 0 && len(remote) > 0 {
		t.local, t.remote = new(rotation), new(rotation)
		t.local.init(local, t.weights)
		t.remote.init(remote, t.weights)
		t.isLocal = make([]bool, len(nodes))
		for _, j := range local {
			t.isLocal[j] = true
		}
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

// init sets r up over members, whose weights are given by index.
func (r *rotation) init(members []uint16, weights []int64) {
	r.members = members
	// Smooth weighted round robin (as nginx's): the sequence spreads each
	// node's turns over the round instead of giving them in a row.
	var total int64
	for _, j := range members {
		total += weights[j]
	}
	cur := make([]int64, len(members))
	r.seq = make([]uint16, total)
	for i := range r.seq {
		best := 0
		for m, j := range members {
			cur[m] += weights[j]
			if cur[m] > cur[best] {
				best = m
			}
		}
		cur[best] -= total
		r.seq[i] = members[best]
	}
}

// start is where a pick begins: the next turn, or with advance false the
// last one again.
func (r *rotation) start(advance bool) int {
	if advance {
		return int(r.next.Add(1))
	}
	return int(r.next.Load())
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

// want is what a pick is for.
type want struct {
	route   string
	key     string // Hash's, if hasKey
	hasKey  bool
	avoid   *node // the node of the call's last attempt, if any
	advance bool  // take a turn of round robin (false for a hedged copy)
}

// How well a node suits a call, best first.
const (
	gradeBest       = iota // serves the route, fit, not the node to avoid
	gradeAvoid             // the node to avoid, otherwise best
	gradeUnfit             // ejected, or not serving by its health checks
	gradeUnfitAvoid        // both
	gradeNoRoute           // publishes routes without this one, or said it has none
	gradeNone              // no usable connection: never picked
)

// grade grades node j for w.
func (t *table) grade(j int, w *want) int {
	nd := t.nodes[j]
	if !nd.c.usable() {
		return gradeNone
	}
	if !t.serves(j, w.route) {
		return gradeNoRoute
	}
	g := gradeBest
	if nd.unfit() {
		g = gradeUnfit
	}
	if nd == w.avoid {
		g++
	}
	return g
}

// serves reports whether node j publishes route (or no route at all) and
// has not said lately that it lacks it.
func (t *table) serves(j int, route string) bool {
	if rs := t.routes[j]; rs != nil {
		if _, ok := rs[route]; !ok {
			return false
		}
	}
	return !t.nodes[j].lacks(route)
}

// pick returns a node for a call: one that serves its route, is fit and is
// not w.avoid, by the policy b, preferring the client's zone; failing
// that, w.avoid, then an unfit node, then one that does not serve the
// route (whose answer, NotFound, is then the call's); nil if no node has a
// usable connection. It takes no lock: the table is immutable and the
// counters atomic.
func (t *table) pick(b Balance, w *want) *node {
	if len(t.nodes) == 0 {
		return nil
	}
	var tier *rotation // the nodes preferred: nil for all
	if t.local != nil {
		tier = t.zoneFor(w.route)
	}
	switch {
	case b == Hash && w.hasKey:
		return t.pickHash(w, tier)
	case b == LeastInflight:
		return t.pickLeast(w, tier)
	}
	return t.pickTurn(w, tier)
}

// pickTurn is round robin: the node whose turn it is, if it is best;
// otherwise the best nodes take its turn in turn, by weight, so that a
// node that cannot take calls gives its share to all the others evenly.
func (t *table) pickTurn(w *want, tier *rotation) *node {
	r := tier
	if r == nil {
		r = &t.all
	}
	start := r.start(w.advance)
	if j := int(r.seq[start%len(r.seq)]); t.grade(j, w) == gradeBest {
		return t.nodes[j]
	}
	if nd := t.spread(r, w); nd != nil {
		return nd
	}
	if r != &t.all {
		if nd := t.spread(&t.all, w); nd != nil {
			return nd
		}
	}
	return t.fallback(w, start)
}

// spread returns one of r's best nodes for w, each in turn as often as its
// weight says, or nil if it has none.
func (t *table) spread(r *rotation, w *want) *node {
	var total int64
	for _, j := range r.members {
		if t.grade(int(j), w) == gradeBest {
			total += t.weights[j]
		}
	}
	if total == 0 {
		return nil
	}
	x := int64(uint64(r.skip.Add(1)) % uint64(total))
	var last *node
	for _, j := range r.members {
		if t.grade(int(j), w) != gradeBest { // graded again: it may have changed meanwhile
			continue
		}
		last = t.nodes[j]
		if x < t.weights[j] {
			return last
		}
		x -= t.weights[j]
	}
	return last
}

// fallback returns the node of the best grade short of gradeNone, the
// first found from start, or nil.
func (t *table) fallback(w *want, start int) *node {
	var best *node
	bestGrade := gradeNone
	n := len(t.nodes)
	for k := range n {
		j := (start + k) % n
		if g := t.grade(j, w); g < bestGrade {
			best, bestGrade = t.nodes[j], g
			if g == gradeBest {
				break
			}
		}
	}
	return best
}

// inTier reports whether node j is one of tier's (any node for nil).
func (t *table) inTier(j int, tier *rotation) bool {
	return tier == nil || t.isLocal[j] == (tier == t.local)
}

// pickLeast is LeastInflight: of the best nodes, preferring tier's, the
// one with the fewest calls in flight for its weight.
func (t *table) pickLeast(w *want, tier *rotation) *node {
	n := len(t.nodes)
	start := t.all.start(w.advance)
	var best, fb *node
	var bestLoad, bestWeight int64
	bestIn := false
	fbGrade := gradeNone
	for k := range n {
		j := (start + k) % n
		nd := t.nodes[j]
		g := t.grade(j, w)
		if g != gradeBest {
			if g < fbGrade {
				fb, fbGrade = nd, g
			}
			continue
		}
		in := t.inTier(j, tier)
		load, wt := nd.inflight.Load(), t.weights[j]
		if best == nil || (in && !bestIn) || (in == bestIn && load*bestWeight < bestLoad*wt) {
			best, bestLoad, bestWeight, bestIn = nd, load, wt, in
		}
	}
	if best != nil {
		return best
	}
	return fb
}

// pickHash is Hash with a key: the key's node on the ring, or, if it
// cannot take the call, the next distinct nodes along the ring (keys of a
// dead node spread, others stay put), those of tier first.
func (t *table) pickHash(w *want, tier *rotation) *node {
	h := hashString(w.key)
	i, _ := slices.BinarySearchFunc(t.ring, h, func(p ringPoint, h uint64) int {
		switch {
		case p.hash < h:
			return -1
		case p.hash > h:
			return 1
		}
		return 0
	})
	var anyBest, fb *node
	fbGrade := gradeNone
	for k := range len(t.ring) {
		j := int(t.ring[(i+k)%len(t.ring)].node)
		g := t.grade(j, w)
		switch {
		case g == gradeBest && t.inTier(j, tier):
			return t.nodes[j]
		case g == gradeBest:
			if anyBest == nil {
				anyBest = t.nodes[j]
			}
		case g < fbGrade:
			fb, fbGrade = t.nodes[j], g
		}
	}
	if anyBest != nil {
		return anyBest
	}
	return fb
}

// zoneShare is the share of calls, in thousandths, that stay in the zone
// for each thousandth of the zone's weight that is fit: 1.4, Envoy's
// overprovisioning factor, so that a zone with more than 5 of 7 of its
// nodes fit keeps all its calls, and one with fewer spills the rest.
const zoneShare = 1400

// zoneFor returns the rotation a call to route prefers: the zone's while
// its nodes that serve the route are fit, and, as they fail, the others'
// for a growing share of calls.
func (t *table) zoneFor(route string) *rotation {
	var fit, all int64
	for _, j := range t.local.members {
		if !t.serves(int(j), route) {
			continue
		}
		all += t.weights[j]
		if nd := t.nodes[j]; nd.c.usable() && !nd.unfit() {
			fit += t.weights[j]
		}
	}
	if all == 0 {
		return t.remote
	}
	share := uint64(min(1000, zoneShare*fit/all))
	switch share {
	case 1000:
		return t.local
	case 0:
		return t.remote
	}
	// Of every thousand calls, share stay, spread evenly.
	c := t.spill.Add(1)
	if c*share/1000 != (c-1)*share/1000 {
		return t.local
	}
	return t.remote
}

// another reports whether a node other than avoid could take a call to
// route now (fit or not).
func (t *table) another(route string, avoid *node) bool {
	w := want{route: route, avoid: avoid}
	for j := range t.nodes {
		if g := t.grade(j, &w); g == gradeBest || g == gradeUnfit {
			return true
		}
	}
	return false
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
