package reactor_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/rpcd/rpcd/auth"
	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// The cast: alice reads orders, bob is an admin with the secrets,
// wendy writes orders; every connection may use chat.
var (
	topicTokens = auth.Tokens{
		"tokA": {Subject: "alice", Roles: []string{"reader"}},
		"tokB": {Subject: "bob", Roles: []string{"admin"}},
		"tokW": {Subject: "wendy", Roles: []string{"writer"}},
	}
	topicRules = map[string]auth.TopicRules{
		"reader": {Subscribe: auth.TopicList{Allow: []string{"orders.>"}, Deny: []string{"orders.internal.>"}}},
		"writer": {Publish: auth.TopicList{Allow: []string{"orders.>"}}},
		"admin": {
			Publish:   auth.TopicList{Allow: []string{"secrets.>", "orders.>"}},
			Subscribe: auth.TopicList{Allow: []string{"secrets.>", "orders.>"}},
		},
		auth.EveryRole: {Publish: auth.TopicList{Allow: []string{"chat.*"}}, Subscribe: auth.TopicList{Allow: []string{"chat.*"}}},
	}
)

func topicPolicy(t testing.TB) *auth.TopicPermissions {
	p, err := auth.Topics(topicRules)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// refusals collects what Options.PublishRefused is given.
type refusals struct {
	mu   sync.Mutex
	errs []error
}

func (r *refusals) add(err error) { r.mu.Lock(); r.errs = append(r.errs, err); r.mu.Unlock() }

func (r *refusals) all() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// dialAs dials s with token, collecting its publish refusals in r.
func dialAs(t *testing.T, s *reactor.Server, token string, r *refusals) *client.Client {
	opts := client.Options{Credentials: &client.Credentials{Secret: []byte(token)}}
	if r != nil {
		opts.PublishRefused = r.add
	}
	return dial(t, s, opts)
}

// TestTopicPermissions: over a real server, the cases. alice (a
// reader) cannot read bob's secrets, nor subscribe to ">" with her partial
// permission, nor publish; what she may read, she gets; a refused publish
// reaches nobody and its publisher learns of it; refusals are counted by
// kind and a label that names no identity, and logged at a bounded rate.
func TestTopicPermissions(t *testing.T) {
	var logs syncBuffer
	s := start(t, builtinRegistry(), reactor.Options{
		Authenticator: topicTokens,
		Topics:        topicPolicy(t),
		Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
	})
	baseline(t)
	ctx := ctxT(t)
	var aliceRefused, wendyRefused refusals
	alice := dialAs(t, s, "tokA", &aliceRefused)
	bob := dialAs(t, s, "tokB", nil)
	wendy := dialAs(t, s, "tokW", &wendyRefused)

	// alice cannot read bob's topic, by any pattern that reaches it.
	for _, pattern := range []string{"secrets.>", "secrets.payroll", "*.payroll", ">", "orders.internal.*", "orders.*.x"} {
		_, err := alice.Subscribe(ctx, pattern, make(chan client.Message, 1))
		if !errors.Is(err, handler.ErrPermissionDenied) || !strings.Contains(err.Error(), "alice may not subscribe to "+pattern) || !handler.IsUnprocessed(err) {
			t.Fatalf("alice subscribing to %s: %v", pattern, err)
		}
	}
	// What she may read, she gets.
	orders := make(chan client.Message, 10)
	if _, err := alice.Subscribe(ctx, "orders.>", make(chan client.Message, 1)); !errors.Is(err, handler.ErrPermissionDenied) {
		t.Fatalf("orders.> reaches orders.internal, which alice is denied: %v", err)
	}
	if _, err := alice.Subscribe(ctx, "orders.*.created", orders); err == nil {
		t.Fatal("orders.*.created reaches orders.internal.created, which alice is denied")
	}
	if _, err := alice.Subscribe(ctx, "orders.eu.>", orders); err != nil {
		t.Fatalf("alice subscribing to orders.eu.>: %v", err)
	}
	secrets := make(chan client.Message, 10)
	if _, err := bob.Subscribe(ctx, "secrets.>", secrets); err != nil {
		t.Fatalf("bob subscribing to secrets.>: %v", err)
	}
	chat := make(chan client.Message, 10)
	if _, err := alice.Subscribe(ctx, "chat.*", chat); err != nil {
		t.Fatalf("every role may read chat: %v", err)
	}

	// bob's secret reaches bob alone.
	if err := bob.PublishRaw(ctx, "secrets.payroll", []byte("salary 1M")); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, secrets, 1)[0]; m.Topic != "secrets.payroll" {
		t.Fatalf("bob got %+v", m)
	}

	// A reader cannot publish: refused, delivered to nobody, and alice
	// learns of it once she flushes.
	published := s.PubSubStats().Published
	if err := alice.PublishRaw(ctx, "orders.eu.created", []byte("forged")); err != nil {
		t.Fatal(err)
	}
	if err := alice.PublishRaw(ctx, "secrets.payroll", []byte("salary 0")); err != nil {
		t.Fatal(err)
	}
	if err := alice.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	errs := aliceRefused.all()
	if len(errs) != 2 || alice.RefusedPublishes() != 2 {
		t.Fatalf("alice's refusals: %v (counted %d), want 2", errs, alice.RefusedPublishes())
	}
	for i, topic := range []string{"orders.eu.created", "secrets.payroll"} {
		var he *handler.Error
		if !errors.As(errs[i], &he) || he.Code != proto.CodePermissionDenied || !he.Unprocessed || he.Message != "alice may not publish to "+topic {
			t.Fatalf("refusal %d: %#v", i, errs[i])
		}
	}
	if n := s.PubSubStats().Published; n != published {
		t.Fatalf("%d refused publishes counted as published", n-published)
	}

	// A writer publishes orders, which alice reads, and chat, which every
	// role may; not the secrets.
	for _, topic := range []string{"orders.eu.created", "chat.lobby", "secrets.payroll", "orders.us.created"} {
		if err := wendy.PublishRaw(ctx, topic, []byte("from wendy")); err != nil {
			t.Fatal(err)
		}
	}
	if err := wendy.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if errs := wendyRefused.all(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "wendy may not publish to secrets.payroll") {
		t.Fatalf("wendy's refusals: %v", errs)
	}
	if m := receive(t, orders, 1)[0]; m.Topic != "orders.eu.created" || string(m.Payload) != "from wendy" {
		t.Fatalf("alice got %+v", m)
	}
	if m := receive(t, chat, 1)[0]; m.Topic != "chat.lobby" {
		t.Fatalf("alice got %+v on chat", m)
	}
	quiet(t, orders, "alice's orders.eu.>")
	quiet(t, secrets, "bob's secrets.>")

	// Counted by kind and the rules' first token, never an identity.
	want := map[reactor.TopicRefusal]uint64{
		{Kind: "subscribe", Label: "secrets"}: 2,
		{Kind: "subscribe", Label: "*"}:       1,
		{Kind: "subscribe", Label: ">"}:       1,
		{Kind: "subscribe", Label: "orders"}:  4,
		{Kind: "publish", Label: "orders"}:    1,
		{Kind: "publish", Label: "secrets"}:   2,
	}
	if got := s.PubSubStats().Refused; !mapsEqual(got, want) {
		t.Fatalf("refusals counted %v, want %v", got, want)
	}

	// A flood of refusals is counted whole and logged at a bounded rate.
	for range 200 {
		if err := alice.PublishRaw(ctx, "orders.flood", nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := alice.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := alice.RefusedPublishes(); n != 202 {
		t.Fatalf("alice counted %d refusals, want 202", n)
	}
	if n := s.PubSubStats().Refused[reactor.TopicRefusal{Kind: "publish", Label: "orders"}]; n != 201 {
		t.Fatalf("the server counted %d refused publishes to orders, want 201", n)
	}
	if lines := strings.Count(logs.String(), "rpcd: topic permission refused"); lines > 12 {
		t.Fatalf("%d log lines for 211 refusals in a moment", lines)
	}
	if !strings.Contains(logs.String(), "suppressed=") || !strings.Contains(logs.String(), "subject=alice") {
		t.Fatalf("the log:\n%s", logs.String())
	}
	healthy{t, alice}.check() // refusals leave the connection open
}

func mapsEqual(a, b map[reactor.TopicRefusal]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestTopicRefusalsOnTheWire: what a client written from the page sees. A
// refused Subscribe is answered by an Unsubscribe for its id, a refused
// Publish by an Error of call id 0 with the Unprocessed flag, each before
// the answer to anything sent after it, and the connection stays open.
func TestTopicRefusalsOnTheWire(t *testing.T) {
	s := start(t, builtinRegistry(), reactor.Options{Authenticator: topicTokens, Topics: topicPolicy(t)})
	r := dialRaw(t, s)
	var b []byte
	b = proto.AppendHello(b, "token", []byte("tokA"))
	b = proto.AppendSubscribe(b, 1, "secrets.>")
	b = proto.AppendPublish(b, "secrets.payroll", proto.CodecJSON, []byte(`"salary 0"`))
	b = proto.AppendSubscribe(b, 2, "orders.eu.>")
	b = proto.AppendPing(b, []byte("after"))
	r.send(b)
	want := []struct {
		kind proto.Kind
		id   uint32
		code proto.Code
		msg  string
	}{
		{proto.KindWelcome, 0, 0, ""},
		{proto.KindUnsubscribe, 1, proto.CodePermissionDenied, "alice may not subscribe to secrets.>"},
		{proto.KindError, 0, proto.CodePermissionDenied, "alice may not publish to secrets.payroll"},
		{proto.KindPong, 0, 0, ""},
	}
	for _, w := range want {
		f, err := r.next()
		if err != nil {
			t.Fatal(err)
		}
		var code proto.Code
		var msg []byte
		switch f.Kind {
		case proto.KindUnsubscribe:
			code, msg = f.UnsubscribeBody()
		case proto.KindError:
			code, msg = f.ErrorBody()
			if f.Flags != proto.FlagUnprocessed {
				t.Errorf("the refusal's flags: %v", f.Flags)
			}
		}
		if f.Kind != w.kind || f.ID != w.id || code != w.code || string(msg) != w.msg {
			t.Fatalf("got %v id %d %v %q, want %v id %d %v %q", f.Kind, f.ID, code, msg, w.kind, w.id, w.code, w.msg)
		}
	}
	if st := s.PubSubStats(); st.Subscriptions != 1 || st.Published != 0 {
		t.Fatalf("stats %+v: want orders.eu.> alone, nothing published", st)
	}
}

// TestTopicsWithoutIdentity: a server with topic permissions and no way to
// authenticate gives every connection EveryRole's rules and nothing more,
// refusing the rest as Unauthenticated; without Options.Topics, anything
// goes.
func TestTopicsWithoutIdentity(t *testing.T) {
	s := start(t, builtinRegistry(), reactor.Options{Topics: topicPolicy(t)})
	var refused refusals
	c := dial(t, s, client.Options{PublishRefused: refused.add})
	ctx := ctxT(t)
	chat := make(chan client.Message, 10)
	if _, err := c.Subscribe(ctx, "chat.*", chat); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Subscribe(ctx, "orders.>", chat); !errors.Is(err, handler.ErrUnauthenticated) {
		t.Fatalf("an anonymous subscription to orders.>: %v", err)
	}
	for _, topic := range []string{"orders.eu", "chat.lobby"} {
		if err := c.PublishRaw(ctx, topic, []byte(topic)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if errs := refused.all(); len(errs) != 1 || !errors.Is(errs[0], handler.ErrUnauthenticated) || !strings.Contains(errs[0].Error(), "orders.eu") {
		t.Fatalf("refusals %v", errs)
	}
	if m := receive(t, chat, 1)[0]; m.Topic != "chat.lobby" {
		t.Fatalf("got %+v", m)
	}

	open := start(t, builtinRegistry(), reactor.Options{})
	c2 := dial(t, open, client.Options{})
	if _, err := c2.Subscribe(ctx, ">", make(chan client.Message, 1)); err != nil {
		t.Fatalf("without topic permissions: %v", err)
	}
	if err := c2.PublishRaw(ctx, "secrets.payroll", nil); err != nil {
		t.Fatal(err)
	}
	if err := c2.Flush(ctx); err != nil || c2.RefusedPublishes() != 0 {
		t.Fatalf("without topic permissions: %v, %d refused", err, c2.RefusedPublishes())
	}
}

// TestTopicPermissionsMutualTLS: on the TLS transport, an identity from a
// client certificate (alice, OU admin) gets its role's topics; a client
// without a certificate has no identity, and only EveryRole's.
func TestTopicPermissionsMutualTLS(t *testing.T) {
	s := reactor.New(builtinRegistry(), reactor.Options{TLS: serverTLS(t), Topics: topicPolicy(t)})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	ctx := ctxT(t)
	for _, tc := range []struct {
		cert bool
		want error
	}{{true, nil}, {false, handler.ErrUnauthenticated}} {
		var refused refusals
		c, err := client.Dial(ctx, s.Addr().String(), client.Options{TLS: clientTLS(t, tc.cert), PublishRefused: refused.add})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		secrets := make(chan client.Message, 1)
		if _, err := c.Subscribe(ctx, "secrets.>", secrets); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Fatalf("certificate %v: subscribing to secrets.>: %v, want %v", tc.cert, err, tc.want)
		}
		if err := c.PublishRaw(ctx, "secrets.payroll", []byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := c.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if tc.cert {
			if m := receive(t, secrets, 1)[0]; m.Topic != "secrets.payroll" || len(refused.all()) != 0 {
				t.Fatalf("alice by her certificate: %+v, refusals %v", m, refused.all())
			}
		} else if errs := refused.all(); len(errs) != 1 || !errors.Is(errs[0], handler.ErrUnauthenticated) {
			t.Fatalf("without a certificate: refusals %v", errs)
		}
	}
}
