package client

import (
	"context"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// ServiceOptions configures a Cluster. The zero ServiceOptions is valid.
type ServiceOptions struct {
	// Options configures the client of each node (connections, TLS,
	// credentials, timeouts) and the cluster's retries: MaxRetries,
	// Idempotent, MinBackoff and MaxBackoff, WaitForReady and Timeout apply
	// to a call across the nodes, so a call sent again goes to another
	// node when there is one. Handler and Pushes are not supported.
	Options

	// Balance is how calls are spread; default RoundRobin.
	Balance Balance

	// HashKey, if set, gives the key of a call under Hash balancing;
	// ok false sends the call round robin. It runs on every call, on the
	// caller's goroutine, and must not block. Nil takes the key from
	// WithAffinity.
	HashKey func(ctx context.Context, route string, payload []byte) (key string, ok bool)

	// Resolver, if set, resolves the name given to DialService; nil takes
	// it from the target's scheme (RegisterScheme).
	Resolver Resolver

	// Ejection takes a node whose calls keep failing out of the balancing
	// for a while; the zero Ejection takes the defaults.
	Ejection Ejection

	// Hedge sends a copy of a slow call to a second node; the zero Hedge
	// sends none.
	Hedge Hedge

	// Zone, if set, is the client's zone: calls go to the nodes whose
	// Meta["zone"] (ZoneKey) is the same, as long as enough of them are
	// fit, and spill over to the others as they fail: with fewer than 5 of
	// 7 of the zone's weight fit (connected, not ejected, serving), a
	// share of calls in proportion leaves the zone; with none, all do.
	// Empty: no preference.
	Zone string

	// HealthCheck asks each node its status now and then, and sends
	// calls away from those that say they do not serve; the zero
	// HealthCheck asks nothing.
	HealthCheck HealthCheck

	// RetryBudget bounds the calls sent again to a share of those that
	// succeed; the zero RetryBudget takes the defaults (100 tokens, a tenth
	// of one back per success), a negative MaxTokens sets none.
	RetryBudget RetryBudget
}

// Ejection is a circuit breaker per node: after Failures calls in a row
// to a node fail as a node fails them (Unavailable, ResourceExhausted,
// Internal, or DeadlineExceeded once sent), the node gets no calls for
// Duration, as long as another node can take them. Then calls reach it
// again: the first that succeeds closes the breaker, and a failure
// before that ejects it again at once, for twice as long as the last
// time (at most 16 times Duration). Calls that were out on the node when
// it was ejected, and failures that are the call's own (a bad argument, no
// such route, a cancel), do not count. A node that registers afresh (its
// Node.Instance changes: a restart) starts with its breaker closed.
type Ejection struct {
	// Failures is how many calls in a row must fail; default 5, and a
	// negative value never ejects.
	Failures int
	// Duration is how long a first ejection lasts; default 10s.
	Duration time.Duration
}

// Cluster calls a service made of several servers (nodes), one Client for
// each, spreading calls by ServiceOptions.Balance. It follows the set of
// nodes its Resolver reports: a node that joins is dialled and used, one
// that leaves takes no new calls and is closed once the calls on it have
// ended. It is safe for concurrent use by many goroutines.
type Cluster struct {
	name  string
	opts  ServiceOptions
	node  Options  // each node's client options
	hc    *Client  // its limits check requests (engine.Header)
	owned Resolver // built from the target: closed with the cluster

	tab atomic.Pointer[table]

	mu      sync.Mutex       // guards the fields below (never held by a call)
	members map[string]*node // by address: in the table, or being dialled
	want    map[string]Node  // the resolver's latest set
	ready   chan struct{}    // closed, and replaced, on each table change

	retries atomic.Uint64
	hedges  atomic.Uint64
	noNode  error
	eject   *Ejection     // nil: never
	icpt    Interceptor   // Options.Interceptors as one; nil for none
	sweep   *timeoutSweep // ends calls' Options.Timeout deadlines (timeout.go)
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closed  atomic.Bool

	throttled atomic.Uint64 // failed calls the retry budget kept from being sent again
	budget    *retryBudget  // nil: none
	holding   bool          // under mu: the resolver's latest set is empty, and the last good one is kept
}

// DialService returns a Cluster for the service target names:
// "scheme://authority/NAME" (for example "etcd://127.0.0.1:2379/echo" once
// discovery/etcd is imported, or "static://10.0.0.1:7070,10.0.0.2:7070/echo"),
// or, with ServiceOptions.Resolver set, NAME alone. It returns once the
// resolver has given the first set of nodes and each has been dialled once;
// nodes that could not be reached are dialled again in the background. It
// waits for that first set until ctx ends or Options.DialTimeout passes,
// whichever comes first, and then fails Unavailable with the resolver's
// last error (an etcd that does not answer, a name that does not resolve).
func DialService(ctx context.Context, target string, opts ServiceOptions) (*Cluster, error) {
	if opts.Codec != nil {
		if err := checkCodec(opts.Codec); err != nil {
			return nil, err
		}
	}
	if err := checkCompression(opts.Compression); err != nil {
		return nil, err
	}
	r, name := opts.Resolver, target
	var owned Resolver
	if r == nil {
		var err error
		if r, name, err = resolverFor(target); err != nil {
			return nil, err
		}
		owned = r
	}
	k := newCluster(name, opts, owned)
	updates, err := r.Watch(k.ctx, name)
	if err != nil {
		k.Close()
		return nil, err
	}
	var first []Node
	wait := time.NewTimer(k.opts.DialTimeout)
	defer wait.Stop()
	var msg string
	select {
	case nodes, ok := <-updates:
		if !ok {
			k.Close()
			return nil, &handler.Error{Code: proto.CodeUnavailable, Message: "resolving " + target + ": the resolver stopped", Unprocessed: true}
		}
		first = nodes
	case <-ctx.Done():
		msg = ctx.Err().Error()
	case <-wait.C:
		msg = "no first set of nodes within the dial timeout of " + k.opts.DialTimeout.String()
	}
	if msg != "" {
		if le, ok := r.(lastErrorer); ok {
			if err := le.LastError(name); err != nil {
				msg = strings.TrimPrefix(err.Error(), "rpcd: ") + " (gave up: " + msg + ")"
			}
		}
		k.Close()
		return nil, &handler.Error{Code: proto.CodeUnavailable, Message: "resolving " + target + ": " + msg, Unprocessed: true}
	}
	k.update(ctx, first)
	k.wg.Add(1)
	go k.follow(updates)
	return k, nil
}

func newCluster(name string, opts ServiceOptions, owned Resolver) *Cluster {
	opts.Options = opts.Options.withDefaults()
	if opts.Ejection.Failures == 0 {
		opts.Ejection.Failures = 5
	}
	if opts.Ejection.Duration <= 0 {
		opts.Ejection.Duration = 10 * time.Second
	}
	if opts.HealthCheck.Interval > 0 {
		if opts.HealthCheck.Timeout <= 0 {
			opts.HealthCheck.Timeout = min(opts.HealthCheck.Interval, time.Second)
		}
		if opts.HealthCheck.Route == "" {
			opts.HealthCheck.Route = HealthRoute
		}
	}
	each := opts.Options
	each.MaxRetries = -1 // the cluster retries, on another node if it can
	each.WaitForReady = false
	each.Handler, each.Pushes = nil, nil
	each.Interceptors = nil // the cluster's wrap its calls, once each
	k := &Cluster{
		name: name, opts: opts, node: each, owned: owned,
		hc:      &Client{opts: each},
		members: map[string]*node{},
		want:    map[string]Node{},
		ready:   make(chan struct{}),
		noNode:  &handler.Error{Code: proto.CodeUnavailable, Message: "no usable node of service " + name, Unprocessed: true},
		sweep:   newTimeoutSweep(),
		budget:  newRetryBudget(opts.RetryBudget),
	}
	if opts.Ejection.Failures > 0 {
		k.eject = &opts.Ejection
	}
	k.icpt = chain(opts.Interceptors)
	k.ctx, k.cancel = context.WithCancel(context.Background())
	k.tab.Store(newTable(nil, opts.Balance, opts.Zone))
	return k
}

// holdCheck is how often a Cluster that keeps its last known nodes
// against an empty set from its resolver checks that they still answer.
const holdCheck = time.Second

// follow applies the resolver's updates until it stops.
func (k *Cluster) follow(updates <-chan []Node) {
	defer k.wg.Done()
	t := time.NewTicker(holdCheck)
	defer t.Stop()
	for {
		select {
		case nodes, ok := <-updates:
			if !ok {
				return
			}
			k.update(k.ctx, nodes)
		case <-t.C:
			k.mu.Lock()
			drop := k.holding && k.answeringLocked() == 0
			k.mu.Unlock()
			if drop {
				k.update(k.ctx, nil)
			}
		}
	}
}

// answeringLocked counts the members that answer calls now: connected,
// not ejected, serving. k.mu is held.
func (k *Cluster) answeringLocked() int {
	n := 0
	for _, m := range k.members {
		if m != nil && m.c.usable() && !m.unfit() {
			n++
		}
	}
	return n
}

// update makes the cluster's members follow nodes: new ones are dialled
// (ctx bounds the wait for the first dial; the dial goes on in the
// background), gone ones drained, changed weights applied, and a node
// that registered afresh (a new Instance) taken as new. An empty set does
// not replace one whose nodes still answer: the last good set stays, as
// grpc-go keeps its last good addresses when its resolver fails, until
// the resolver lists a node again or none of them answers.
func (k *Cluster) update(ctx context.Context, nodes []Node) {
	k.mu.Lock()
	if k.closed.Load() {
		k.mu.Unlock()
		return
	}
	if len(nodes) == 0 && len(k.want) > 0 {
		if n := k.answeringLocked(); n > 0 {
			if !k.holding {
				k.holding = true
				k.node.Logger.Warn("rpcd: the resolver lists no node of the service; keeping the last known nodes, which still answer",
					"service", k.name, "nodes", len(k.want), "answering", n)
			}
			k.mu.Unlock()
			return
		}
	}
	if k.holding {
		k.holding = false
		if len(nodes) > 0 {
			k.node.Logger.Info("rpcd: the resolver lists nodes of the service again", "service", k.name, "nodes", len(nodes))
		} else {
			k.node.Logger.Warn("rpcd: none of the last known nodes answers; the service has no node", "service", k.name)
		}
	}
	k.want = make(map[string]Node, len(nodes))
	for _, n := range nodes {
		k.want[n.Addr] = n
	}
	var dialled []chan struct{}
	for addr, n := range k.want {
		if m, ok := k.members[addr]; ok {
			if m == nil {
				continue // being dialled: join reads k.want when it connects
			}
			if n.Instance == m.Instance || m.c.usable() {
				if n.Instance != m.Instance {
					m.fresh() // registered afresh, and connected already
					k.node.Logger.Info("rpcd: node registered afresh", "service", k.name, "addr", addr)
				}
				m.Node = n // weight, routes, metadata: read under k.mu only; the table is rebuilt below
				continue
			}
			// Registered afresh (restarted) while its connection is down:
			// a new member, dialled at once, not on its old client's backoff.
			k.node.Logger.Info("rpcd: node registered afresh", "service", k.name, "addr", addr)
			delete(k.members, addr)
			m.gone.Store(true)
			k.wg.Add(1)
			go k.drain(m)
		}
		first := make(chan struct{})
		dialled = append(dialled, first)
		k.members[addr] = nil // being dialled
		k.wg.Add(1)
		go k.join(n, first)
	}
	for addr, m := range k.members {
		if _, ok := k.want[addr]; !ok && m != nil {
			delete(k.members, addr)
			m.gone.Store(true)
			k.wg.Add(1)
			go k.drain(m)
		}
	}
	k.publishLocked()
	k.mu.Unlock()
	for _, ch := range dialled {
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// join dials n until it answers, the resolver drops it, or the cluster
// closes; first is closed after the first attempt.
func (k *Cluster) join(n Node, first chan struct{}) {
	defer k.wg.Done()
	// DialService waits for the first attempt: its node must be in the
	// table, if it answered, when DialService returns.
	defer func() {
		if first != nil {
			close(first)
		}
	}()
	for attempt := 0; ; attempt++ {
		c, err := Dial(k.ctx, n.Addr, k.node)
		k.mu.Lock()
		cur, wanted := k.want[n.Addr]
		if k.closed.Load() || !wanted {
			if m, ok := k.members[n.Addr]; ok && m == nil {
				delete(k.members, n.Addr)
			}
			k.mu.Unlock()
			if c != nil {
				c.Close()
			}
			return
		}
		if err == nil {
			m := &node{Node: cur, c: c, eject: k.eject, budget: k.budget}
			k.members[n.Addr] = m
			k.publishLocked()
			if k.opts.HealthCheck.Interval > 0 {
				k.wg.Add(1)
				go k.checkHealth(m, n.Addr)
			}
			k.mu.Unlock()
			return
		}
		k.mu.Unlock()
		if first != nil {
			close(first)
			first = nil
		}
		k.node.Logger.Debug("rpcd: dialling a node", "service", k.name, "addr", n.Addr, "attempt", attempt+1, "err", err)
		t := time.NewTimer(k.hc.backoff(attempt))
		select {
		case <-t.C:
		case <-k.ctx.Done():
			t.Stop()
			k.mu.Lock()
			if m, ok := k.members[n.Addr]; ok && m == nil {
				delete(k.members, n.Addr)
			}
			k.mu.Unlock()
			return
		}
	}
}

// drainPoll is how often a leaving node is checked for calls still on it.
const drainPoll = 5 * time.Millisecond

// drain closes m, which left the set, once no call is on it.
func (k *Cluster) drain(m *node) {
	defer k.wg.Done()
	t := time.NewTicker(drainPoll)
	defer t.Stop()
	for m.inflight.Load() > 0 {
		select {
		case <-t.C:
		case <-k.ctx.Done(): // the calls still on it fail with ErrClosed
			m.c.Close()
			return
		}
	}
	m.c.Close()
}

// publishLocked swaps in a table of the connected members, in address
// order (so that every client of the service builds the same hash ring),
// and wakes calls waiting for a node. k.mu is held.
func (k *Cluster) publishLocked() {
	var nodes []*node
	for _, m := range k.members {
		if m != nil {
			nodes = append(nodes, m)
		}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Addr < nodes[j].Addr })
	k.tab.Store(newTable(nodes, k.opts.Balance, k.opts.Zone))
	close(k.ready)
	k.ready = make(chan struct{})
}

// NodeStats is one node of a Cluster as Nodes reports it.
type NodeStats struct {
	Node
	Calls    uint64 // calls this cluster sent it
	Inflight int64  // calls on it now
	Usable   bool   // it has a usable connection
	Ejected  bool   // it gets no calls for now (ServiceOptions.Ejection)
	Serving  bool   // its health checks say it serves (ServiceOptions.HealthCheck); true without them
}

// Nodes returns the nodes calls go to now, in address order.
func (k *Cluster) Nodes() []NodeStats {
	k.mu.Lock() // Node fields change under it
	defer k.mu.Unlock()
	t := k.tab.Load()
	out := make([]NodeStats, 0, len(t.nodes))
	for _, n := range t.nodes {
		out = append(out, NodeStats{Node: n.Node, Calls: n.calls.Load(), Inflight: n.inflight.Load(), Usable: n.c.usable(), Ejected: n.out(), Serving: !n.notServing.Load()})
	}
	return out
}

// Close stops following the resolver and closes every node's client.
// Calls still waiting fail with ErrClosed.
func (k *Cluster) Close() error {
	k.mu.Lock()
	if !k.closed.CompareAndSwap(false, true) {
		k.mu.Unlock()
		return nil
	}
	k.cancel()
	members := k.members
	k.members = map[string]*node{}
	k.mu.Unlock()
	k.wg.Wait()
	for _, m := range members {
		if m != nil {
			m.c.Close()
		}
	}
	for _, n := range k.tab.Load().nodes {
		n.c.Close() // also those draining when Close came
	}
	k.sweep.stop()
	if c, ok := k.owned.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// usable reports whether c has a connection a call can use now.
func (c *Client) usable() bool {
	if c.closed.Load() {
		return false
	}
	for _, s := range c.slots {
		if w := s.w.Load(); w != nil && w.usable() {
			return true
		}
	}
	return false
}
