package reactor_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// receive takes n messages from ch, failing the test after a bounded wait.
func receive(t *testing.T, ch <-chan client.Message, n int) []client.Message {
	t.Helper()
	var got []client.Message
	timeout := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case m := <-ch:
			got = append(got, m)
		case <-timeout:
			t.Fatalf("got %d of %d messages: %+v", len(got), n, got)
		}
	}
	return got
}

// quiet fails the test if ch receives anything for a little while.
func quiet(t *testing.T, ch <-chan client.Message, what string) {
	t.Helper()
	select {
	case m := <-ch:
		t.Fatalf("%s got %q on %s", what, m.Payload, m.Topic)
	case <-time.After(50 * time.Millisecond):
	}
}

func topics(ms []client.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Topic+"="+string(m.Payload))
	}
	return out
}

// TestPubSub: wildcard and exact subscriptions get exactly the messages
// their patterns match, whether a client or a handler publishes; an
// unsubscribed pattern gets nothing more.
func TestPubSub(t *testing.T) {
	reg := builtinRegistry()
	var srv atomic.Pointer[reactor.Server] // set before any call; the race detector cannot see that through TCP
	reg.HandleFunc("Pub/FromHandler", func(_ context.Context, req, reply []byte) ([]byte, error) {
		_, err := srv.Load().Publish("orders.eu.created", proto.CodecRaw, req) // inline: it never blocks
		return reply, err
	})
	s := start(t, reg, reactor.Options{})
	srv.Store(s)
	sub := dial(t, s, client.Options{})
	pub := dial(t, s, client.Options{})
	healthy{t, sub}.check()
	healthy{t, pub}.check()
	baseline(t)
	ctx := ctxT(t)

	chans := map[string]chan client.Message{}
	subs := map[string]*client.Subscription{}
	for _, p := range []string{"orders.*.created", "orders.>", "orders.eu.created", "other"} {
		chans[p] = make(chan client.Message, 100)
		var err error
		if subs[p], err = sub.Subscribe(ctx, p, chans[p]); err != nil {
			t.Fatalf("subscribe %s: %v", p, err)
		}
	}
	if st := s.PubSubStats(); st.Subscriptions != 4 {
		t.Fatalf("%d subscriptions on the server, want 4", st.Subscriptions)
	}
	for _, topic := range []string{"orders.eu.created", "orders.us.created", "orders.eu.deleted", "orders", "nothing.here"} {
		if err := pub.PublishRaw(ctx, topic, []byte("1")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pub.CallRaw(ctx, "Pub/FromHandler", []byte("2"), nil); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"orders.*.created":  {"orders.eu.created=1", "orders.us.created=1", "orders.eu.created=2"},
		"orders.>":          {"orders.eu.created=1", "orders.us.created=1", "orders.eu.deleted=1", "orders.eu.created=2"},
		"orders.eu.created": {"orders.eu.created=1", "orders.eu.created=2"},
		"other":             nil,
	}
	for p, w := range want {
		if got := topics(receive(t, chans[p], len(w))); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("%s got %v, want %v", p, got, w)
		}
		quiet(t, chans[p], p)
	}

	// JSON both ways, and Unsubscribe stops delivery.
	if err := subs["orders.>"].Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	healthy{t, sub}.check() // the Unsubscribe is in
	if err := pub.Publish(ctx, "orders.eu.created", map[string]int{"n": 3}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"orders.*.created", "orders.eu.created"} {
		m := receive(t, chans[p], 1)[0]
		if m.Codec != proto.CodecJSON || string(m.Payload) != `{"n":3}` {
			t.Errorf("%s got %+v", p, m)
		}
	}
	quiet(t, chans["orders.>"], "an ended subscription")
	if st := s.PubSubStats(); st.Subscriptions != 3 || st.Published != 7 || st.Delivered != 11 {
		t.Fatalf("stats %+v; want 3 subscriptions, 7 published, 11 delivered", st)
	}

	// A message no frame can carry is refused, by the server's Publish too.
	if _, err := s.Publish("orders.eu.created", proto.CodecRaw, make([]byte, proto.DefaultMaxFrameSize)); !errors.Is(err, handler.ErrResourceExhausted) {
		t.Fatalf("publishing more than a frame holds: %v", err)
	}

	// Bad patterns and topics are refused before anything is sent.
	if _, err := sub.Subscribe(ctx, "orders.>.x", make(chan client.Message)); !errors.Is(err, handler.ErrInvalidArgument) {
		t.Fatalf("bad pattern: %v", err)
	}
	if err := pub.PublishRaw(ctx, "orders.*", nil); !errors.Is(err, handler.ErrInvalidArgument) {
		t.Fatalf("publish to a pattern: %v", err)
	}
}

// TestPubSubFanOut: one publisher, 100 subscribers on connections of their
// own, half on a channel and half on a function (SubscribeFunc): every
// subscriber gets every message, in the order published.
func TestPubSubFanOut(t *testing.T) {
	s := start(t, builtinRegistry(), reactor.Options{})
	const subscribers, messages = 100, 200
	chans := make([]chan client.Message, subscribers)
	for i := range chans {
		chans[i] = make(chan client.Message, messages)
		c := dial(t, s, client.Options{})
		var err error
		if i%2 == 0 {
			_, err = c.Subscribe(ctxT(t), "ticks.>", chans[i])
		} else { // the reader calls a function: it copies what it keeps
			ch := chans[i]
			_, err = c.SubscribeFunc(ctxT(t), "ticks.>", func(m client.Message) {
				m.Payload = append([]byte(nil), m.Payload...)
				ch <- m
			})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	pub := dial(t, s, client.Options{})
	for i := range messages {
		if err := pub.PublishRaw(ctxT(t), "ticks.all", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i, ch := range chans {
		for j, m := range receive(t, ch, messages) {
			if string(m.Payload) != fmt.Sprint(j) {
				t.Fatalf("subscriber %d: message %d is %q", i, j, m.Payload)
			}
		}
	}
	if st := s.PubSubStats(); st.Delivered != subscribers*messages || st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestPubSubLimits: past MaxSubscriptions a Subscribe is refused with a
// reason; a subscriber that does not read loses messages (DropMessages) or
// its connection (CutOff), counted, while a healthy subscriber gets all.
func TestPubSubLimits(t *testing.T) {
	t.Run("max subscriptions", func(t *testing.T) {
		s := start(t, builtinRegistry(), reactor.Options{MaxSubscriptions: 2})
		c := dial(t, s, client.Options{})
		for _, p := range []string{"a", "b"} {
			if _, err := c.Subscribe(ctxT(t), p, make(chan client.Message, 1)); err != nil {
				t.Fatal(err)
			}
		}
		_, err := c.Subscribe(ctxT(t), "c", make(chan client.Message, 1))
		if !errors.Is(err, handler.ErrResourceExhausted) {
			t.Fatalf("third subscription: %v", err)
		}
	})
	for _, policy := range []reactor.SlowPolicy{reactor.DropMessages, reactor.CutOff} {
		t.Run(fmt.Sprint("slow subscriber, policy ", policy), func(t *testing.T) {
			s := start(t, builtinRegistry(), reactor.Options{SubscriberQueue: 64 << 10, SlowSubscriber: policy})
			good := make(chan client.Message, 1000)
			gc := dial(t, s, client.Options{})
			if _, err := gc.Subscribe(ctxT(t), "flood", good); err != nil {
				t.Fatal(err)
			}
			healthy{t, gc}.check()
			baseline(t)
			r := dialRaw(t, s) // subscribes, then never reads
			r.send(proto.AppendSubscribe(nil, 1, "flood"))
			for i := 0; s.PubSubStats().Subscriptions < 2; i++ {
				if i == 5000 {
					t.Fatal("the raw subscription never arrived")
				}
				time.Sleep(time.Millisecond)
			}
			msg := make([]byte, 8<<10)
			for range 1000 { // 8 MiB to a subscriber that reads none
				if _, err := s.Publish("flood", proto.CodecRaw, msg); err != nil {
					t.Fatal(err)
				}
				// The good subscriber keeps up, in its own time.
				select {
				case <-good:
				case <-time.After(10 * time.Second):
					t.Fatal("the healthy subscriber stopped getting messages")
				}
			}
			st := s.PubSubStats()
			switch policy {
			case reactor.DropMessages:
				if st.Dropped == 0 || st.CutOff != 0 {
					t.Fatalf("stats %+v: want messages dropped, nobody cut off", st)
				}
			case reactor.CutOff:
				if st.CutOff != 1 || st.Dropped != 0 {
					t.Fatalf("stats %+v: want one subscriber cut off", st)
				}
				for i := 0; s.PubSubStats().Subscriptions != 1; i++ {
					if i == 5000 {
						t.Fatalf("the cut-off subscriber's subscription is still there: %+v", s.PubSubStats())
					}
					time.Sleep(time.Millisecond)
				}
			}
			t.Logf("%+v", st)
			r.nc.Close()
		})
	}
}

// TestResubscribeOnReconnect: a subscriber whose server restarts on the
// same address gets messages again without subscribing again itself.
func TestResubscribeOnReconnect(t *testing.T) {
	s1 := reactor.New(builtinRegistry(), reactor.Options{})
	if err := s1.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	addr := s1.Addr().String()
	ctx := ctxT(t)
	ch := make(chan client.Message, 100)
	c, err := client.Dial(ctx, addr, client.Options{MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sub, err := c.Subscribe(ctx, "news.*", ch)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := s1.Publish("news.one", proto.CodecRaw, []byte("before")); n != 1 {
		t.Fatalf("delivered to %d subscribers, want 1", n)
	}
	receive(t, ch, 1)
	if err := s1.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	s2 := reactor.New(builtinRegistry(), reactor.Options{})
	if err := s2.Start(addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s2.Shutdown(sctx)
	})
	for i := 0; ; i++ { // until the client has reconnected and subscribed again
		if n, _ := s2.Publish("news.two", proto.CodecRaw, []byte("after")); n == 1 {
			break
		}
		if i == 1000 {
			t.Fatal("the subscription did not come back")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if m := receive(t, ch, 1)[0]; m.Topic != "news.two" || string(m.Payload) != "after" {
		t.Fatalf("after the restart: %+v", m)
	}
	if sub.Err() != nil {
		t.Fatalf("the subscription ended: %v", sub.Err())
	}
}
