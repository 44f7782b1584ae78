package reactor

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/proto"
)

// Publish and subscribe (docs/protocol.md, "Publish and subscribe").
//
// The server keeps every subscription of every connection in one index,
// a tree of topic tokens with a branch for "*" and a list for ">" at each
// level. A Publish is matched on the event loop that reads it (or on the
// goroutine that calls Server.Publish): under the index's read lock it
// collects the matching subscriptions, then appends a Message frame to
// each subscriber connection's outbox and wakes that connection's loop,
// once per wake-up however many messages it gets. Each loop writes its
// connections' messages with the rest of their output: fan-out is done by
// the loops, batched per connection. Subscribing and unsubscribing take
// the write lock; they are rare beside publishing.
//
// A subscriber that does not keep up has at most Options.SubscriberQueue
// bytes waiting (its outbox and what the kernel has not taken); past that,
// Options.SlowSubscriber says whether its messages are dropped or it is
// cut off. Both are counted.

// SlowPolicy is what happens to a subscriber whose queue is full.
type SlowPolicy int

const (
	// DropMessages drops the messages that do not fit; the subscriber
	// stays connected and gets later ones once it catches up.
	DropMessages SlowPolicy = iota
	// CutOff closes the subscriber's connection, with a GoAway
	// (ResourceExhausted) saying why; its client reconnects and
	// subscribes again.
	CutOff
)

// subscription is one Subscribe of one connection.
type subscription struct {
	c       *conn
	sid     uint32
	pattern string
	zip     proto.Compression // its Messages' payloads of CompressMin bytes or more go compressed so
}

// subIndex holds a server's subscriptions by pattern.
type subIndex struct {
	mu   sync.RWMutex
	root subNode
}

// subNode is one level of the index: the subscriptions whose pattern ends
// here, those whose pattern goes on with ">", and the next levels.
type subNode struct {
	next map[string]*subNode
	star *subNode
	here []*subscription
	rest []*subscription // pattern ends with ">" after this level
}

func (n *subNode) empty() bool {
	return len(n.next) == 0 && n.star == nil && len(n.here) == 0 && len(n.rest) == 0
}

// add enters sub under its pattern.
func (x *subIndex) add(sub *subscription) {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := &x.root
	for p := sub.pattern; ; {
		tok, rest, more := strings.Cut(p, ".")
		switch {
		case tok == ">":
			n.rest = append(n.rest, sub)
			return
		case tok == "*":
			if n.star == nil {
				n.star = &subNode{}
			}
			n = n.star
		default:
			child := n.next[tok]
			if child == nil {
				if n.next == nil {
					n.next = make(map[string]*subNode)
				}
				child = &subNode{}
				n.next[tok] = child
			}
			n = child
		}
		if !more {
			n.here = append(n.here, sub)
			return
		}
		p = rest
	}
}

// remove takes sub out of the index, and the levels it leaves empty.
func (x *subIndex) remove(sub *subscription) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.root.remove(sub, sub.pattern)
}

func (n *subNode) remove(sub *subscription, p string) {
	tok, rest, more := strings.Cut(p, ".")
	if tok == ">" {
		n.rest = without(n.rest, sub)
		return
	}
	child := n.star
	if tok != "*" {
		child = n.next[tok]
	}
	if child == nil {
		return
	}
	if more {
		child.remove(sub, rest)
	} else {
		child.here = without(child.here, sub)
	}
	if child.empty() {
		if tok == "*" {
			n.star = nil
		} else {
			delete(n.next, tok)
		}
	}
}

// without removes sub from subs, keeping no reference to it.
func without(subs []*subscription, sub *subscription) []*subscription {
	for i, s := range subs {
		if s == sub {
			last := len(subs) - 1
			subs[i] = subs[last]
			subs[last] = nil
			return subs[:last]
		}
	}
	return subs
}

// match appends the subscriptions matching topic, a valid topic, to out.
func (x *subIndex) match(topic []byte, out []*subscription) []*subscription {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.root.match(topic, out)
}

func (n *subNode) match(topic []byte, out []*subscription) []*subscription {
	out = append(out, n.rest...) // at least one token is left: ">" matches
	tok, rest, more := topic, []byte(nil), false
	if i := bytes.IndexByte(topic, '.'); i >= 0 {
		tok, rest, more = topic[:i], topic[i+1:], true
	}
	for _, child := range [2]*subNode{n.next[string(tok)], n.star} { // the lookup does not allocate
		switch {
		case child == nil:
		case more:
			out = child.match(rest, out)
		default:
			out = append(out, child.here...)
		}
	}
	return out
}

// pubsubStats are the counters behind PubSubStats.
type pubsubStats struct {
	published, delivered, dropped, cutOff atomic.Uint64
}

// PubSubStats counts publish/subscribe traffic since the server started.
type PubSubStats struct {
	Subscriptions int    // live now
	Published     uint64 // messages published, by clients or by Publish
	Delivered     uint64 // Message frames queued for subscribers
	Dropped       uint64 // messages a slow subscriber missed (DropMessages)
	CutOff        uint64 // subscribers cut off for being slow (CutOff)

	// Refused counts the publishes and subscriptions Options.Topics
	// refused, by kind and label; nil if none was.
	Refused map[TopicRefusal]uint64
}

// PubSubStats returns the publish/subscribe counters now.
func (s *Server) PubSubStats() PubSubStats {
	st := &s.pubsub
	return PubSubStats{
		Subscriptions: int(s.nsubs.Load()),
		Published:     st.published.Load(),
		Delivered:     st.delivered.Load(),
		Dropped:       st.dropped.Load(),
		CutOff:        st.cutOff.Load(),
		Refused:       s.refusals.snapshot(),
	}
}

// matches reuses the slices a publish collects its subscriptions in.
var matches = sync.Pool{New: func() any { s := make([]*subscription, 0, 64); return &s }}

// Publish delivers payload, in codec, to every subscription matching
// topic, and returns how many subscriptions it was for (a slow subscriber
// may still drop it: PubSubStats counts those). Handlers and any
// goroutine may call it; it never blocks on a subscriber. It is the
// server's own program publishing: Options.Topics does not apply.
func (s *Server) Publish(topic string, codec proto.Codec, payload []byte) (int, error) {
	if err := proto.ValidTopic([]byte(topic)); err != nil {
		return 0, err
	}
	if n := proto.HeaderSize + len(topic) + len(payload); n > s.opts.Limits.MaxFrameSize {
		return 0, handler.Errorf(proto.CodeResourceExhausted, "message of %d bytes exceeds the frame limit of %d", n, s.opts.Limits.MaxFrameSize)
	}
	return s.publish([]byte(topic), codec, payload, nil), nil
}

// publish fans a valid topic's message out to its subscribers. With fan
// (a publishing connection's, during its wake-up) the Messages are
// gathered per subscriber and handed over when the wake-up ends; without,
// each goes at once.
func (s *Server) publish(topic []byte, codec proto.Codec, payload []byte, fan *fanout) int {
	s.pubsub.published.Add(1)
	mp := matches.Get().(*[]*subscription)
	subs := s.subs.match(topic, (*mp)[:0])
	var packed packedPayload
	n := 0
	for _, sub := range subs {
		if sub.c.closed.Load() {
			continue
		}
		body, zip := payload, proto.CompressionNone
		if sub.zip != proto.CompressionNone && len(payload) >= s.opts.CompressMin {
			body, zip = packed.get(payload, sub.zip)
		}
		if fan != nil {
			fan.add(sub.c, sub.sid, topic, codec, body, zip)
		} else {
			m := proto.AppendMessage(nil, sub.sid, topic, codec, body)
			proto.SetCompression(m, zip)
			sub.c.deliver(m, 1)
		}
		n++
	}
	packed.release()
	clear(subs)
	*mp = subs[:0]
	matches.Put(mp)
	return n
}

// packedPayload is a publish's payload compressed, once per compression
// whatever the number of subscribers that take it, in pooled buffers that
// live until the publish has queued its Messages.
type packedPayload struct {
	tried [4]bool // by compression
	bufs  [4]*[]byte
	raw   [4][]byte // what compressing wrote, for PutBuffer
	ok    [4]bool   // it made the payload smaller: the Messages carry it
}

// get returns the payload compressed with zip if that makes it smaller,
// else the payload as it is and CompressionNone.
func (p *packedPayload) get(payload []byte, zip proto.Compression) ([]byte, proto.Compression) {
	if !p.tried[zip] {
		p.tried[zip] = true
		p.bufs[zip] = compression.GetBuffer()
		p.raw[zip] = compression.Append((*p.bufs[zip])[:0], payload, zip)
		p.ok[zip] = len(p.raw[zip]) < len(payload)
	}
	if !p.ok[zip] {
		return payload, proto.CompressionNone
	}
	return p.raw[zip], zip
}

// release gives the buffers back.
func (p *packedPayload) release() {
	for i, bp := range p.bufs {
		if bp != nil {
			compression.PutBuffer(bp, p.raw[i])
		}
	}
}

// fanout gathers the Messages a publishing connection's wake-up makes, by
// subscriber connection: each subscriber then takes its lock once per
// wake-up of the publisher, not once per message, and is woken once. (A
// lock per message, taken by one loop and released while the subscriber's
// own loop takes it too, was a third of the server's time in the FanOut
// scenario.)
type fanout struct {
	to    map[*conn]*fanBatch
	order []*conn // in the order first seen, for a stable hand-over
	spare []*fanBatch
}

// fanBatch is one subscriber's Messages from one wake-up.
type fanBatch struct {
	frames []byte
	n      int
}

func (f *fanout) add(c *conn, sid uint32, topic []byte, codec proto.Codec, payload []byte, zip proto.Compression) {
	b := f.to[c]
	if b == nil {
		if f.to == nil {
			f.to = make(map[*conn]*fanBatch)
		}
		if k := len(f.spare); k > 0 {
			b, f.spare = f.spare[k-1], f.spare[:k-1]
		} else {
			b = &fanBatch{}
		}
		f.to[c] = b
		f.order = append(f.order, c)
	}
	start := len(b.frames)
	b.frames = proto.AppendMessage(b.frames, sid, topic, codec, payload)
	proto.SetCompression(b.frames[start:], zip)
	b.n++
}

// flush hands every subscriber its Messages and forgets them.
func (f *fanout) flush() {
	for i, c := range f.order {
		b := f.to[c]
		c.deliver(b.frames, b.n)
		if cap(b.frames) <= 64<<10 { // keep a modest buffer for the next wake-up
			b.frames, b.n = b.frames[:0], 0
			f.spare = append(f.spare, b)
		}
		f.order[i] = nil
	}
	f.order = f.order[:0]
	clear(f.to) // hold no subscriber connection past this wake-up
}

// deliver queues n Message frames for c, unless c's queue is full, and
// wakes c's loop.
func (c *conn) deliver(frames []byte, n int) {
	s := c.s
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return
	}
	if len(c.replies)+int(c.unread.Load())+len(frames) > s.opts.SubscriberQueue {
		c.mu.Unlock()
		if s.opts.SlowSubscriber == CutOff {
			if c.ending.Load() == nil {
				s.pubsub.cutOff.Add(1)
			}
			c.end(proto.CodeResourceExhausted, "subscriber too slow: its queue is full")
		} else {
			s.pubsub.dropped.Add(uint64(n))
		}
		return
	}
	c.replies = append(c.replies, frames...)
	s.pubsub.delivered.Add(uint64(n)) // before the wake: a subscriber that has them finds them counted
	c.unlockAndWake()
}

// subscribe acts on a Subscribe frame, on the connection's own goroutine.
// A refused subscription is answered at once with an Unsubscribe saying
// why.
func (c *conn) subscribe(f *proto.Frame, out []byte) ([]byte, *ending) {
	if _, dup := c.subs[f.ID]; dup {
		return out, &ending{proto.CodeInternal, "rpcd: protocol error: subscription id already in use"}
	}
	if c.s.opts.Topics != nil && !c.access().MaySubscribe(f.Route) {
		return c.refuseSubscribe(f, out), nil
	}
	if len(c.subs) >= c.s.opts.MaxSubscriptions {
		return proto.AppendUnsubscribe(out, f.ID, proto.CodeResourceExhausted, "too many subscriptions on this connection"), nil
	}
	sub := &subscription{c: c, sid: f.ID, pattern: string(f.Route)}
	if takes, ok := f.Metadata.Get(proto.MetaCompression); ok && c.s.opts.CompressMin >= 0 {
		if cs := proto.ParseCompressionList(takes); len(cs) > 0 {
			sub.zip = cs[0] // every compression the list parses to is one the server does
		}
	}
	if c.subs == nil {
		c.subs = make(map[uint32]*subscription)
	}
	c.subs[f.ID] = sub
	c.s.subs.add(sub)
	c.s.nsubs.Add(1)
	return out, nil
}

// unsubscribe ends subscription sid of c; an unknown sid is ignored.
func (c *conn) unsubscribe(sid uint32) {
	if sub := c.subs[sid]; sub != nil {
		delete(c.subs, sid)
		c.s.subs.remove(sub)
		c.s.nsubs.Add(-1)
	}
}

// dropSubscriptions ends every subscription of a closed connection.
func (c *conn) dropSubscriptions() {
	for sid := range c.subs {
		c.unsubscribe(sid)
	}
}

func (p SlowPolicy) String() string {
	switch p {
	case DropMessages:
		return "DropMessages"
	case CutOff:
		return "CutOff"
	}
	return "SlowPolicy(" + strconv.Itoa(int(p)) + ")"
}
