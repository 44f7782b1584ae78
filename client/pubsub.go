package client

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/internal/engine"
	"github.com/rpcd/rpcd/proto"
)

// Publish and subscribe (docs/protocol.md, "Publish and subscribe"). A
// client publishes to a topic ("orders.eu.created") and subscribes to
// patterns, where "*" stands for one token and a final ">" for one or more
// ("orders.*.created", "orders.>"). Subscriptions ride the client's first
// connection; when it is redialled, the client subscribes again by itself.
// Delivery is at most once: messages published while a connection is down,
// or that a full channel has no room for, are lost (and the latter counted).

// Message is a published message as a subscription delivers it.
type Message struct {
	Topic   string      // the topic it was published to
	Codec   proto.Codec // the codec of Payload
	Payload []byte      // the subscriber's own copy (SubscribeFunc: valid until the function returns)
}

// Subscription is a live subscription; Unsubscribe ends it.
type Subscription struct {
	c       *Client
	sid     uint32
	pattern string
	ch      chan<- Message
	fn      func(Message) // instead of ch: SubscribeFunc
	dropped atomic.Uint64
	topic   string // the last topic delivered, reused while the next is the same: the reader's alone

	once sync.Once
	done chan struct{}
	err  error // why it ended; set before done closes
}

// subTable is a client's subscriptions by id.
type subTable struct {
	mu   sync.Mutex
	subs map[uint32]*Subscription
	n    atomic.Int32 // len(subs), for empty, which takes no lock
	next uint32
}

// Subscribe subscribes to pattern and delivers each matching message to
// ch. The goroutine reading the connection never waits for room in ch: a
// message that does not fit is dropped and counted (Subscription.Dropped).
// Subscribe returns once the server has taken the subscription in, or with
// its refusal, marked Unprocessed (nothing was delivered).
func (c *Client) Subscribe(ctx context.Context, pattern string, ch chan<- Message) (*Subscription, error) {
	sub, err := c.subscribe(ctx, &Subscription{c: c, pattern: pattern, ch: ch, done: make(chan struct{})})
	return sub, transport.Received(err)
}

// SubscribeFunc is Subscribe with a function called for each message, on
// the goroutine that reads the connection: no hand-off and no copy, so it
// is the cheapest way to take many messages, but fn must not block (the
// connection reads nothing else meanwhile), and m.Payload is valid only
// until fn returns.
func (c *Client) SubscribeFunc(ctx context.Context, pattern string, fn func(m Message)) (*Subscription, error) {
	sub, err := c.subscribe(ctx, &Subscription{c: c, pattern: pattern, fn: fn, done: make(chan struct{})})
	return sub, transport.Received(err)
}

func (c *Client) subscribe(ctx context.Context, sub *Subscription) (*Subscription, error) {
	pattern := sub.pattern
	if err := transport.RefuseWait(ctx, "subscribing to", pattern); err != nil {
		return nil, err // it waits for the server to take the subscription in
	}
	if err := proto.ValidPattern([]byte(pattern)); err != nil || len(pattern) > c.opts.Limits.MaxRoute {
		return nil, &handler.Error{Code: proto.CodeInvalidArgument, Message: "bad pattern " + pattern, Unprocessed: true}
	}
	if c.closed.Load() {
		return nil, ErrClosed
	}
	w := c.slots[0].w.Load()
	if w == nil || !w.usable() {
		return nil, c.noConn
	}
	t := &c.subs
	t.mu.Lock()
	if t.subs == nil {
		t.subs = make(map[uint32]*Subscription)
	}
	for {
		t.next++
		if _, busy := t.subs[t.next]; t.next != 0 && !busy {
			break
		}
	}
	sub.sid = t.next
	t.subs[sub.sid] = sub
	t.n.Store(int32(len(t.subs)))
	t.mu.Unlock()

	w.enqueueAsync(proto.AppendSubscribe(nil, sub.sid, pattern, c.opts.takes()...))
	// Frames are taken in order: once a call sent after the Subscribe is
	// answered (whatever the answer), the server has acted on it, and a
	// refusal (an Unsubscribe) has arrived before.
	if err := c.roundTrip(ctx, w, "subscribe"); err != nil {
		sub.Unsubscribe()
		return nil, err
	}
	select {
	case <-sub.done:
		// Ended before Subscribe returns: the server refused it, and
		// delivered nothing (protocol.md: unprocessed, as the other
		// clients say).
		if e, ok := sub.err.(*handler.Error); ok {
			refused := *e
			refused.Unprocessed = true
			return nil, &refused
		}
		return nil, sub.err
	default:
	}
	return sub, nil
}

// roundTrip sends a call on w and waits for any answer from the server;
// what names the wait in a context's error.
func (c *Client) roundTrip(ctx context.Context, w *wire, what string) error {
	cl := getCall()
	defer putCall(cl)
	id, err := w.register(cl)
	if err != nil {
		return err
	}
	h := proto.Header{Kind: proto.KindRequest, ID: id}
	dl, _ := ctx.Deadline()
	if err := w.enqueueRequest(h, pingRoute, nil, nil, dl); err != nil && w.forget(cl) {
		return err
	}
	w.needRead()
	select {
	case <-cl.done:
	case <-ctx.Done():
		if !w.forget(cl) {
			<-cl.done
			break
		}
		w.abandon(cl.id)
		return engine.ContextError(ctx.Err(), what)
	}
	if handler.CodeOf(cl.err) == proto.CodeUnavailable {
		return cl.err // the connection failed; any answer from the server would do
	}
	return nil
}

// pingRoute is the call Subscribe and Flush wait on: rpcd serves it, and
// any server answers it (NotFound will do).
const pingRoute = "Sys/Ping"

// Pattern is the pattern the subscription was made for.
func (s *Subscription) Pattern() string { return s.pattern }

// Dropped is the number of messages dropped: those the channel had no room
// for, and compressed ones that did not expand.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Done is closed when the subscription ends: Unsubscribe, the server ending
// it (Err says why), or the client closing.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Err is why the subscription ended; nil while it lives or after
// Unsubscribe.
func (s *Subscription) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Unsubscribe ends the subscription. Messages already on their way may
// still be delivered to the channel until the server has the Unsubscribe.
func (s *Subscription) Unsubscribe() error {
	if !s.c.subs.remove(s) {
		return nil
	}
	if w := s.c.slots[0].w.Load(); w != nil {
		w.enqueueAsync(proto.AppendUnsubscribe(nil, s.sid, proto.CodeOK, ""))
	}
	s.end(nil)
	return nil
}

func (s *Subscription) end(err error) {
	s.once.Do(func() {
		s.err = err
		close(s.done)
	})
}

// remove takes s out of the table; false if it was not there.
func (t *subTable) remove(s *Subscription) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.subs[s.sid] != s {
		return false
	}
	delete(t.subs, s.sid)
	t.n.Store(int32(len(t.subs)))
	return true
}

// empty reports whether there are no subscriptions.
func (t *subTable) empty() bool { return t.n.Load() == 0 }

// get returns the subscription sid; nil if there is none.
func (t *subTable) get(sid uint32) *Subscription {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.subs[sid]
}

// all returns every subscription.
func (t *subTable) all() []*Subscription {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Subscription, 0, len(t.subs))
	for _, s := range t.subs {
		out = append(out, s)
	}
	return out
}

// resubscribe sends every subscription again on w, the first connection's
// new wire.
func (c *Client) resubscribe(w *wire) {
	var frames []byte
	for _, s := range c.subs.all() {
		frames = proto.AppendSubscribe(frames, s.sid, s.pattern, c.opts.takes()...)
	}
	if len(frames) > 0 {
		w.enqueueAsync(frames)
	}
}

// endSubscriptions ends every subscription with err, at Close.
func (c *Client) endSubscriptions(err error) {
	for _, s := range c.subs.all() {
		if c.subs.remove(s) {
			s.end(err)
		}
	}
}

// deliver hands a Message frame to its subscription, on the reader
// goroutine: never waiting, copying the payload, expanded if it came
// compressed (within the room its frame has under maxFrame). A payload
// that does not expand is dropped and counted as a message that did not
// fit.
func (t *subTable) deliver(f *proto.Frame, maxFrame int) {
	s := t.get(f.ID)
	if s == nil {
		return // unsubscribed while it was on its way
	}
	if s.topic != string(f.Route) { // compares without converting
		s.topic = string(f.Route)
	}
	payload, zip := f.Payload, f.Flags.Compression()
	if s.fn != nil {
		if zip != proto.CompressionNone {
			bp := compression.GetBuffer()
			b, err := compression.Expand((*bp)[:0], payload, zip, f.PayloadRoom(maxFrame))
			defer func() { compression.PutBuffer(bp, b) }()
			if err != nil {
				s.dropped.Add(1)
				return
			}
			payload = b
		}
		s.fn(Message{Topic: s.topic, Codec: f.Codec, Payload: payload})
		return
	}
	if zip != proto.CompressionNone {
		b, err := compression.Expand(nil, payload, zip, f.PayloadRoom(maxFrame))
		if err != nil {
			s.dropped.Add(1)
			return
		}
		payload = b
	} else {
		payload = append([]byte(nil), payload...)
	}
	select {
	case s.ch <- Message{Topic: s.topic, Codec: f.Codec, Payload: payload}:
	default:
		s.dropped.Add(1)
	}
}

// ended acts on an Unsubscribe from the server: it ended the subscription,
// and says why.
func (t *subTable) ended(f *proto.Frame) {
	s := t.get(f.ID)
	if s == nil || !t.remove(s) {
		return
	}
	code, msg := f.UnsubscribeBody()
	s.end(&handler.Error{Code: code, Message: "subscription " + s.pattern + " ended by the server: " + string(msg)})
}

// Publish publishes in, encoded as JSON (or Options.Codec), to topic. It
// returns once the message is queued for writing; the server delivers it
// to every matching subscription, this client's included, labelled with
// the codec (Message.Codec). A server with topic permissions may refuse
// it: nothing is delivered, and the refusal comes back later, to
// Options.PublishRefused and RefusedPublishes; Flush waits for it.
func (c *Client) Publish(ctx context.Context, topic string, in any) error {
	payload, err := transport.AppendArgWith(c.opts.Codec, nil, in)
	if err != nil {
		return err
	}
	return transport.Received(c.publish(ctx, topic, c.opts.Codec.ID(), payload))
}

// PublishRaw publishes payload, as raw bytes, to topic.
func (c *Client) PublishRaw(ctx context.Context, topic string, payload []byte) error {
	return transport.Received(c.publish(ctx, topic, proto.CodecRaw, payload))
}

func (c *Client) publish(ctx context.Context, topic string, codec proto.Codec, payload []byte) error {
	if err := proto.ValidTopic([]byte(topic)); err != nil {
		return &handler.Error{Code: proto.CodeInvalidArgument, Message: "bad topic " + topic, Unprocessed: true}
	}
	h, _, err := engine.Header(ctx, proto.KindPublish, codec, topic, payload, &c.opts.Limits)
	if err != nil {
		return err
	}
	h.Deadline = 0 // a publish carries none
	w, err := c.pick()
	if err == c.noConn && c.opts.WaitForReady {
		if werr := transport.RefuseWait(ctx, "waiting for a connection to publish to", topic); werr != nil {
			return werr
		}
		w, err = c.awaitConn(ctx, topic, err)
	}
	if err != nil {
		return err
	}
	dl, _ := ctx.Deadline()
	return w.enqueueRequest(h, topic, nil, payload, dl)
}

// publishRefusals are the server's refusals of a client's publishes.
type publishRefusals struct {
	n  atomic.Uint64
	fn func(error) // Options.PublishRefused
}

// publishRefused acts on an Error of call id 0 from the server: it refused
// a Publish of this client's. It runs on the goroutine reading the
// connection.
func (s *serving) publishRefused(f *proto.Frame) {
	s.pubs.n.Add(1)
	if s.pubs.fn != nil {
		code, msg := f.ErrorBody()
		s.pubs.fn(&handler.Error{Code: code, Message: string(msg), Unprocessed: f.Flags&proto.FlagUnprocessed != 0})
	}
}

// RefusedPublishes is the number of this client's publishes the server
// refused (topic permissions), as far as their refusals have arrived.
func (c *Client) RefusedPublishes() uint64 { return c.pubs.n.Load() }

// Flush returns once the server has acted on every frame this client wrote
// before it, on each of its connections: every Publish is delivered or
// refused, and the refusals have reached Options.PublishRefused and
// RefusedPublishes; every Subscribe and Unsubscribe is in place. It costs
// a call's round trip per connection (to Sys/Ping; any answer will do).
func (c *Client) Flush(ctx context.Context) error {
	if c.closed.Load() {
		return ErrClosed
	}
	for _, s := range c.slots {
		w := s.w.Load()
		if w == nil || !w.usable() {
			continue // what it carried is lost with it, or was never sent
		}
		if err := c.roundTrip(ctx, w, "flush"); err != nil {
			return err
		}
	}
	return nil
}
