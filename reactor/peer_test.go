package reactor_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/gobcodec"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

var (
	_ handler.Peer = (*reactor.Peer)(nil)
	_ handler.Peer = (*client.Client)(nil)
)

// clientRoutes are the routes the tests' clients serve to the server.
func clientRoutes(name string, ran *atomic.Int64) *handler.Registry {
	reg := handler.NewRegistry()
	reg.Handle("Client/Double", handler.Func(func(ctx context.Context, n int) (string, error) {
		if ran != nil {
			ran.Add(1)
		}
		return fmt.Sprintf("%s:%d", name, 2*n), nil
	}))
	reg.HandleFunc("Client/Echo", func(_ context.Context, req, reply []byte) ([]byte, error) {
		return append(reply, req...), nil
	})
	reg.HandleFunc("Client/Wait", func(ctx context.Context, _, reply []byte) ([]byte, error) {
		<-ctx.Done() // until the server's deadline or cancel
		return reply, ctx.Err()
	})
	// A handler that calls the server back while the server's call waits.
	reg.Handle("Client/SumOnServer", handler.Func(func(ctx context.Context, in builtin.SumArgs) (int64, error) {
		var sum int64
		err := handler.CallFrom(ctx).Peer.Call(ctx, builtin.Sum, in, &sum)
		return sum, err
	}))
	return reg
}

// TestReverseCall: a server handler calls the client that called it, on the
// same connection, and waits for the answer; the client's handler can call
// the server back in turn.
func TestReverseCall(t *testing.T) {
	reg := builtinRegistry()
	reg.Handle("Ask/Client", handler.Func(func(ctx context.Context, n int) (string, error) {
		var got string
		err := handler.CallFrom(ctx).Peer.Call(ctx, "Client/Double", n, &got)
		return got, err
	}), handler.Blocking())
	reg.Handle("Ask/ClientToSum", handler.Func(func(ctx context.Context, in builtin.SumArgs) (int64, error) {
		var sum int64
		err := handler.CallFrom(ctx).Peer.Call(ctx, "Client/SumOnServer", in, &sum)
		return sum, err
	}), handler.Blocking())
	s := start(t, reg, reactor.Options{})
	var ranA, ranB atomic.Int64
	a := dial(t, s, client.Options{Handler: clientRoutes("a", &ranA)})
	b := dial(t, s, client.Options{Handler: clientRoutes("b", &ranB)})
	healthy{t, a}.check()
	healthy{t, b}.check()
	baseline(t)
	ctx := ctxT(t)

	for i := range 20 { // each server call goes back on the caller's own connection
		var got string
		c, want := a, fmt.Sprintf("a:%d", 2*i)
		if i%2 == 1 {
			c, want = b, fmt.Sprintf("b:%d", 2*i)
		}
		if err := c.Call(ctx, "Ask/Client", i, &got); err != nil || got != want {
			t.Fatalf("call %d: %q, %v; want %q", i, got, err, want)
		}
	}
	if ranA.Load() != 10 || ranB.Load() != 10 {
		t.Fatalf("client handlers ran %d and %d times, want 10 each", ranA.Load(), ranB.Load())
	}
	var sum int64
	if err := a.Call(ctx, "Ask/ClientToSum", builtin.SumArgs{A: 40, B: 2}, &sum); err != nil || sum != 42 {
		t.Fatalf("server -> client -> server: %d, %v", sum, err)
	}
}

// TestReverseCallRules: an inline handler may notify its peer but not wait
// for it; a client without the route answers NotFound; a server's deadline
// reaches the client's handler, which is cancelled; a client that goes
// away fails the server's call with Unavailable.
func TestReverseCallRules(t *testing.T) {
	reg := builtinRegistry()
	var peerErr atomic.Pointer[error]
	reg.HandleFunc("Inline/Ask", func(ctx context.Context, _, reply []byte) ([]byte, error) {
		p := handler.CallFrom(ctx).Peer
		if _, err := p.CallRaw(ctx, "Client/Double", nil, nil); err != nil {
			peerErr.Store(&err)
		}
		return reply, p.NotifyRaw(ctx, "Client/Note", []byte("from the loop"))
	})
	peerCall := func(ctx context.Context, route string, timeout time.Duration) error {
		ctx2, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		_, err := handler.CallFrom(ctx).Peer.CallRaw(ctx2, route, nil, nil)
		return err
	}
	reg.HandleFunc("Blocking/Ask", func(ctx context.Context, req, reply []byte) ([]byte, error) {
		err := peerCall(ctx, string(req), 200*time.Millisecond)
		return append(reply, handler.CodeOf(err).String()...), nil
	}, handler.Blocking())
	lost := make(chan error, 1)
	asking := make(chan struct{}, 1)
	reg.HandleFunc("Blocking/AskAndWait", func(ctx context.Context, req, reply []byte) ([]byte, error) {
		asking <- struct{}{}
		_, err := handler.CallFrom(ctx).Peer.CallRaw(context.WithoutCancel(ctx), "Client/Wait", nil, nil)
		lost <- err
		return reply, nil
	}, handler.Blocking())
	s := start(t, reg, reactor.Options{})
	notes := make(chan client.Push, 4)
	c := dial(t, s, client.Options{Handler: clientRoutes("c", nil), Pushes: notes})
	bare := dial(t, s, client.Options{}) // serves no routes
	healthy{t, c}.check()
	healthy{t, bare}.check()
	baseline(t)
	ctx := ctxT(t)

	if _, err := c.CallRaw(ctx, "Inline/Ask", nil, nil); err != nil {
		t.Fatalf("inline handler: %v", err)
	}
	if p := peerErr.Load(); p == nil || !errors.Is(*p, handler.ErrFailedPrecondition) || !handler.IsUnprocessed(*p) {
		t.Fatalf("an inline handler waiting for its peer: %v; want FailedPrecondition, unprocessed", p)
	}
	select {
	case m := <-notes:
		if m.Route != "Client/Note" || string(m.Payload) != "from the loop" || m.Codec != proto.CodecRaw {
			t.Fatalf("push %+v", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the inline handler's notification never arrived")
	}

	for _, tc := range []struct {
		c     *client.Client
		route string
		want  proto.Code
	}{
		{c, "Client/Echo", proto.CodeOK},
		{c, "Client/Wait", proto.CodeDeadlineExceeded}, // the client's handler waits for the deadline
		{c, "Client/Nothing", proto.CodeNotFound},
		{bare, "Client/Double", proto.CodeNotFound},
	} {
		reply, err := tc.c.CallRaw(ctx, "Blocking/Ask", []byte(tc.route), nil)
		if err != nil || string(reply) != tc.want.String() {
			t.Fatalf("server calling %s: %s, %v; want %v", tc.route, reply, err, tc.want)
		}
	}

	// The client leaves while the server waits on it, with no deadline:
	// the lost connection alone ends the server's call.
	gone := dial(t, s, client.Options{Handler: clientRoutes("gone", nil)})
	go gone.CallRaw(ctx, "Blocking/AskAndWait", nil, nil)
	<-asking
	time.Sleep(50 * time.Millisecond) // let the server's call reach the client
	gone.Close()
	select {
	case err := <-lost:
		if !errors.Is(err, handler.ErrUnavailable) || handler.IsUnprocessed(err) {
			t.Fatalf("the server's call to a client that left: %#v; want Unavailable, fate unknown", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server's call to a client that left never ended")
	}
}

// TestPushToAll: Broadcast reaches every connection once, and a push to
// one peer reaches only it.
func TestPushToAll(t *testing.T) {
	s := start(t, builtinRegistry(), reactor.Options{})
	const n = 5
	inboxes := make([]chan client.Push, n)
	clients := make([]*client.Client, n)
	for i := range n {
		inboxes[i] = make(chan client.Push, 100)
		clients[i] = dial(t, s, client.Options{Pushes: inboxes[i]})
		healthy{t, clients[i]}.check()
	}
	baseline(t)
	payload, _ := handler.JSON.Append(nil, "news")
	for range 10 {
		if sent := s.Broadcast("News/Flash", proto.CodecJSON, payload); sent != n {
			t.Fatalf("broadcast queued for %d connections, want %d", sent, n)
		}
	}
	for i, in := range inboxes {
		for j := range 10 {
			select {
			case m := <-in:
				if m.Route != "News/Flash" || string(m.Payload) != `"news"` || m.Codec != proto.CodecJSON {
					t.Fatalf("client %d push %d: %+v", i, j, m)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("client %d got %d of 10 broadcasts", i, j)
			}
		}
	}
	peers := s.Peers()
	if len(peers) != n {
		t.Fatalf("%d peers, want %d", len(peers), n)
	}
	// One of them alone.
	if err := peers[0].Notify(ctxT(t), "Only/You", 7); err != nil {
		t.Fatal(err)
	}
	got := -1
	deadline := time.After(5 * time.Second)
	for got < 0 {
		for i, in := range inboxes {
			select {
			case m := <-in:
				if m.Route != "Only/You" || got >= 0 {
					t.Fatalf("client %d got %+v", i, m)
				}
				got = i
			default:
			}
		}
		select {
		case <-deadline:
			t.Fatal("the push to one peer never arrived")
		case <-time.After(time.Millisecond):
		}
	}
	time.Sleep(20 * time.Millisecond) // time for a stray copy to show up
	for i, in := range inboxes {
		if len(in) != 0 {
			t.Fatalf("client %d got a push meant for client %d", i, got)
		}
	}

	// A client that does not drain its channel never blocks its reader:
	// what does not fit is dropped and counted, and calls go on.
	full := make(chan client.Push, 1)
	lazy := dial(t, s, client.Options{Pushes: full})
	healthy{t, lazy}.check()
	for range 10 {
		s.Broadcast("News/Flash", proto.CodecJSON, payload)
	}
	for i := 0; lazy.DroppedPushes() < 9; i++ {
		if i == 5000 {
			t.Fatalf("%d pushes dropped, want 9 of 10", lazy.DroppedPushes())
		}
		time.Sleep(time.Millisecond)
	}
	healthy{t, lazy}.check()
	if len(full) != 1 || lazy.DroppedPushes() != 9 {
		t.Fatalf("channel holds %d, %d dropped", len(full), lazy.DroppedPushes())
	}
}

// TestPushToSlowClient: pushes to a client that never reads are bounded by
// MaxOutbound: Notify starts failing, the connection is cut off, and the
// server's memory stays bounded.
func TestPushToSlowClient(t *testing.T) {
	s := start(t, builtinRegistry(), reactor.Options{MaxOutbound: 256 << 10, WriteTimeout: time.Minute})
	h := newHealthy(t, s)
	baseline(t)
	r := dialRaw(t, s)
	var slow *reactor.Peer
	for range 500 { // the server has the connection once it is listed
		for _, p := range s.Peers() {
			if p.Remote().String() == r.nc.LocalAddr().String() {
				slow = p
			}
		}
		if slow != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if slow == nil {
		t.Fatal("the raw connection is not among the peers")
	}
	msg := make([]byte, 4<<10)
	var err error
	sent := 0
	for ; sent < 100_000 && err == nil; sent++ { // 400 MiB if nothing stopped it
		err = slow.NotifyRaw(context.Background(), "Flood/Msg", msg)
		if sent%64 == 0 {
			time.Sleep(time.Millisecond) // let the loop write and find the backlog
		}
	}
	if !errors.Is(err, handler.ErrResourceExhausted) && !errors.Is(err, handler.ErrUnavailable) {
		t.Fatalf("after %d pushes to a client that never reads: %v", sent, err)
	}
	t.Logf("%d pushes of 4 KiB before %v", sent, err)
	h.check()
}

var registerGob sync.Once

// TestPeerCodec: a Peer's Call and Notify encode in Options.Codec, JSON by
// default and an application's codec when given, and Call decodes the
// reply with it; the client's typed handlers see the codec and take it.
func TestPeerCodec(t *testing.T) {
	registerGob.Do(func() { handler.RegisterCodec(gobcodec.Codec(proto.CodecUser + 5)) })
	for _, codec := range []handler.Codec{nil, gobcodec.Codec(proto.CodecUser + 5)} {
		want := proto.CodecJSON
		if codec != nil {
			want = codec.ID()
		}
		seen := make(chan proto.Codec, 2)
		clientReg := handler.NewRegistry()
		clientReg.Handle("Client/Sum", handler.Func(func(ctx context.Context, in builtin.SumArgs) (int64, error) {
			seen <- handler.CallFrom(ctx).Codec
			return in.A + in.B, nil
		}))
		clientReg.Handle("Client/Note", handler.Func(func(ctx context.Context, in builtin.SumArgs) (struct{}, error) {
			seen <- handler.CallFrom(ctx).Codec
			return struct{}{}, nil
		}))
		reg := handler.NewRegistry()
		reg.Handle("Ask/Client", handler.Func(func(ctx context.Context, _ struct{}) (int64, error) {
			peer := handler.CallFrom(ctx).Peer
			var sum int64
			if err := peer.Call(ctx, "Client/Sum", builtin.SumArgs{A: 40, B: 2}, &sum); err != nil {
				return 0, err
			}
			return sum, peer.Notify(ctx, "Client/Note", builtin.SumArgs{A: 1})
		}), handler.Blocking())
		s := start(t, reg, reactor.Options{Codec: codec})
		c := dial(t, s, client.Options{Handler: clientReg})
		var sum int64
		if err := c.Call(ctxT(t), "Ask/Client", struct{}{}, &sum); err != nil || sum != 42 {
			t.Fatalf("codec %v: %d, %v", want, sum, err)
		}
		for range 2 {
			select {
			case got := <-seen:
				if got != want {
					t.Fatalf("the client's handler saw codec %v, want %v", got, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the client's handlers did not both run")
			}
		}
	}
}

// TestReverseCallTrace: a server's calls to its client carry metadata and
// trace context as the client's calls do: a handler that calls its client
// back with its own context passes on the traceparent, tracestate and
// baggage of the call it serves; handler.WithTraceContext and
// handler.WithBaggage set others; handler.WithMetadata adds pairs. Calls,
// one-way calls and streams the server opens all carry them.
func TestReverseCallTrace(t *testing.T) {
	const (
		tpIn  = "00-11111111111111111111111111111111-1111111111111111-01"
		tpSet = "00-22222222222222222222222222222222-2222222222222222-01"
	)
	// seen renders what the client's handler found in its call's metadata.
	seen := func(md proto.Metadata) string {
		get := func(k string) string { v, _ := md.Get(k); return string(v) }
		return fmt.Sprintf("traceparent=%s tracestate=%s baggage=%s tenant=%s",
			get(proto.MetaTraceParent), get(proto.MetaTraceState), get(proto.MetaBaggage), get("tenant"))
	}
	creg := handler.NewRegistry()
	creg.HandleFunc("Client/Seen", func(ctx context.Context, _, reply []byte) ([]byte, error) {
		return append(reply, seen(handler.CallFrom(ctx).Metadata)...), nil
	})
	notes := make(chan string, 4)
	creg.HandleFunc("Client/Note", func(ctx context.Context, _, reply []byte) ([]byte, error) {
		notes <- seen(handler.CallFrom(ctx).Metadata)
		return reply, nil
	})
	creg.HandleStream("Client/SeenStream", func(ctx context.Context, s handler.Stream) error {
		_, err := s.Write([]byte(seen(handler.CallFrom(ctx).Metadata)))
		return err
	})

	reg := builtinRegistry()
	// Ask/Back calls the client back with the context req names.
	reg.HandleFunc("Ask/Back", func(ctx context.Context, req, reply []byte) ([]byte, error) {
		peer := handler.CallFrom(ctx).Peer
		switch string(req) {
		case "set":
			ctx = handler.WithBaggage(handler.WithTraceContext(ctx, tpSet, "set=1"), "b=set")
		case "metadata":
			ctx = handler.WithMetadata(ctx, "tenant", "acme")
		case "notify":
			return reply, peer.NotifyRaw(ctx, "Client/Note", nil)
		case "stream":
			s, err := peer.(handler.StreamOpener).OpenStream(ctx, "Client/SeenStream")
			if err != nil {
				return reply, err
			}
			if err := s.CloseSend(); err != nil {
				return reply, err
			}
			b, err := io.ReadAll(s)
			return append(reply, b...), err
		}
		return peer.CallRaw(ctx, "Client/Seen", nil, reply)
	}, handler.Blocking())
	s := start(t, reg, reactor.Options{})
	c := dial(t, s, client.Options{Handler: creg})
	ctx := client.WithBaggage(client.WithTraceContext(ctxT(t), tpIn, "in=1"), "b=in")

	passedOn := "traceparent=" + tpIn + " tracestate=in=1 baggage=b=in tenant="
	for _, tc := range []struct{ how, want string }{
		{"passed on", passedOn},
		{"set", "traceparent=" + tpSet + " tracestate=set=1 baggage=b=set tenant="},
		{"metadata", "traceparent=" + tpIn + " tracestate=in=1 baggage=b=in tenant=acme"},
		{"stream", passedOn},
	} {
		got, err := c.CallRaw(ctx, "Ask/Back", []byte(tc.how), nil)
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: the client's handler saw %q, %v; want %q", tc.how, got, err, tc.want)
		}
	}
	if _, err := c.CallRaw(ctx, "Ask/Back", []byte("notify"), nil); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-notes:
		if got != passedOn {
			t.Errorf("notify: the client's handler saw %q, want %q", got, passedOn)
		}
	case <-ctx.Done():
		t.Fatal("the one-way call never reached the client's handler")
	}
}
