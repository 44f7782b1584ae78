package reactor_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// start serves reg on a free loopback port until the test ends.
// newServer is reactor.New, over TLS when the suite runs over TLS, on the
// standard library transport when it runs so (std_test.go).
func newServer(t testing.TB, reg *handler.Registry, opts reactor.Options) *reactor.Server {
	if overTLS {
		opts.TLS = serverTLS(t)
	}
	if overStd {
		opts.StdTransport = true
	}
	return reactor.New(reg, opts)
}

func start(t testing.TB, reg *handler.Registry, opts reactor.Options) *reactor.Server {
	t.Helper()
	s := newServer(t, reg, opts)
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	if overWS {
		serveWS(t, s)
	}
	return s
}

func dial(t testing.TB, s *reactor.Server, opts client.Options) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if overTLS {
		opts.TLS = clientTLS(t, false)
	}
	if overWS {
		opts.Dial = wsDial(t, s)
	}
	c, err := client.Dial(ctx, s.Addr().String(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func builtinRegistry() *handler.Registry {
	reg := handler.NewRegistry()
	builtin.Register(reg)
	return reg
}

func TestBuiltinRoutes(t *testing.T) {
	s := start(t, builtinRegistry(), reactor.Options{})
	c := dial(t, s, client.Options{})
	ctx := ctxT(t)

	var sum int64
	if err := c.Call(ctx, builtin.Sum, builtin.SumArgs{A: 1, B: 2}, &sum); err != nil || sum != 3 {
		t.Fatalf("Math/Sum = %d, %v", sum, err)
	}
	for _, in := range []builtin.SumArgs{{A: math.MaxInt64, B: 1}, {A: math.MinInt64, B: -1}} {
		if err := c.Call(ctx, builtin.Sum, in, &sum); handler.CodeOf(err) != proto.CodeOutOfRange {
			t.Fatalf("Math/Sum of %d and %d: %d, %v; want OutOfRange", in.A, in.B, sum, err)
		}
	}
	if err := c.Call(ctx, builtin.Sum, builtin.SumArgs{A: math.MaxInt64, B: math.MinInt64}, &sum); err != nil || sum != -1 {
		t.Fatalf("Math/Sum at both ends: %d, %v", sum, err)
	}
	var n int32
	if err := c.Call(ctx, builtin.NoArg, nil, &n); err != nil || n != 42 {
		t.Fatalf("NoArg = %d, %v", n, err)
	}
	var echoed string
	long := strings.Repeat("é", 1000)
	if err := c.Call(ctx, builtin.EchoString, long, &echoed); err != nil || echoed != long {
		t.Fatalf("EchoString: %v", err)
	}
	in := builtin.MultiArgsIn{I32: 1, I64: 2, B: true, F64: 0.5, S: "abc"}
	var got float64
	if err := c.Call(ctx, builtin.MultiArgs, in, &got); err != nil || got != builtin.MultiArgsResult(in) {
		t.Fatalf("MultiArgs = %v, %v", got, err)
	}
	var pong string
	if err := c.Call(ctx, builtin.Ping, nil, &pong); err != nil || pong != "pong" {
		t.Fatalf("Ping = %q, %v", pong, err)
	}
	reply, err := c.CallRaw(ctx, builtin.EchoPacket, []byte("raw bytes \x00\xff"), nil)
	if err != nil || string(reply) != "raw bytes \x00\xff" {
		t.Fatalf("EchoPacket = %q, %v", reply, err)
	}
	var routes []handler.RouteInfo
	if err := c.Call(ctx, builtin.Routes, nil, &routes); err != nil || len(routes) != 10 {
		t.Fatalf("Routes = %v, %v", routes, err)
	}
	for _, r := range routes { // the two stream routes are marked
		if r.Stream != (r.Name == builtin.StreamSink || r.Name == builtin.StreamSource) {
			t.Errorf("route %+v", r)
		}
	}
}

// TestManyCallers: many goroutines over two connections, every reply
// matched to its own call.
func TestManyCallers(t *testing.T) {
	s := start(t, builtinRegistry(), reactor.Options{})
	c := dial(t, s, client.Options{Conns: 2})
	ctx := ctxT(t)
	const callers, calls = 64, 100
	var wg sync.WaitGroup
	errc := make(chan error, callers)
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var reply []byte
			for i := range calls {
				req := fmt.Appendf(nil, "caller %d call %d", g, i)
				var err error
				reply, err = c.CallRaw(ctx, builtin.EchoPacket, req, reply[:0])
				if err != nil {
					errc <- err
					return
				}
				if !bytes.Equal(reply, req) {
					errc <- fmt.Errorf("sent %q, got %q", req, reply)
					return
				}
				var sum int64
				if err := c.Call(ctx, builtin.Sum, builtin.SumArgs{A: int64(g), B: int64(i)}, &sum); err != nil || sum != int64(g+i) {
					errc <- fmt.Errorf("sum %d+%d = %d, %v", g, i, sum, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

func TestLargePayloads(t *testing.T) {
	reg := builtinRegistry()
	reg.HandleFunc("Big/Reply", func(_ context.Context, _, reply []byte) ([]byte, error) {
		return append(reply, make([]byte, 5<<20)...), nil
	})
	longMessage := strings.Repeat("why ", 70_000/4) // an Error frame larger than the client's read buffer
	reg.HandleFunc("Big/Error", func(context.Context, []byte, []byte) ([]byte, error) {
		return nil, handler.Errorf(proto.CodeFailedPrecondition, "%s", longMessage)
	})
	s := start(t, reg, reactor.Options{})
	c := dial(t, s, client.Options{})
	healthy{t, c}.check() // taken in before the baseline
	h := newHealthy(t, s)
	baselineAllowing(t, func() int { return int(s.Stats().HandedOff) }) // the replies may outrun the client
	ctx := ctxT(t)
	for _, size := range []int{1 << 20, 4<<20 - 200} {
		req := make([]byte, size)
		for i := range req {
			req[i] = byte(i * 7)
		}
		reply, err := c.CallRaw(ctx, builtin.EchoPacket, req, nil)
		if err != nil || !bytes.Equal(reply, req) {
			t.Fatalf("%d-byte echo: %d bytes back, %v", size, len(reply), err)
		}
	}
	// Over the limit on the way out: refused before sending.
	_, err := c.CallRaw(ctx, builtin.EchoPacket, make([]byte, 5<<20), nil)
	if !errors.Is(err, handler.ErrResourceExhausted) {
		t.Fatalf("5 MiB request: %v", err)
	}
	// Over the limit on the way back: the server sends an error instead.
	_, err = c.CallRaw(ctx, "Big/Reply", nil, nil)
	if !errors.Is(err, handler.ErrResourceExhausted) || !strings.Contains(err.Error(), "exceeds the frame limit") {
		t.Fatalf("5 MiB reply: %v", err)
	}
	// A long error message arrives whole, on a connection that stays good.
	_, err = c.CallRaw(ctx, "Big/Error", nil, nil)
	if handler.CodeOf(err) != proto.CodeFailedPrecondition || handler.MessageOf(err) != longMessage {
		t.Fatalf("70 kB error message: code %v, %d bytes of message", handler.CodeOf(err), len(handler.MessageOf(err)))
	}
	// The connection is still good.
	if reply, err := c.CallRaw(ctx, builtin.EchoPacket, []byte("after"), nil); err != nil || string(reply) != "after" {
		t.Fatalf("call after the big ones: %q, %v", reply, err)
	}
	h.check()
}

// TestEveryErrorCode: each code a handler returns arrives at the client,
// matched by errors.Is and errors.As.
func TestEveryErrorCode(t *testing.T) {
	reg := handler.NewRegistry()
	reg.Handle("Fail/With", handler.Func(func(_ context.Context, code proto.Code) (struct{}, error) {
		return struct{}{}, handler.Errorf(code, "failed with %d", code)
	}))
	s := start(t, reg, reactor.Options{})
	c := dial(t, s, client.Options{})
	ctx := ctxT(t)
	sentinels := map[proto.Code]error{
		proto.CodeCanceled: handler.ErrCanceled, proto.CodeUnknown: handler.ErrUnknown,
		proto.CodeInvalidArgument: handler.ErrInvalidArgument, proto.CodeDeadlineExceeded: handler.ErrDeadlineExceeded,
		proto.CodeNotFound: handler.ErrNotFound, proto.CodeAlreadyExists: handler.ErrAlreadyExists,
		proto.CodePermissionDenied: handler.ErrPermissionDenied, proto.CodeResourceExhausted: handler.ErrResourceExhausted,
		proto.CodeFailedPrecondition: handler.ErrFailedPrecondition, proto.CodeAborted: handler.ErrAborted,
		proto.CodeOutOfRange: handler.ErrOutOfRange, proto.CodeUnimplemented: handler.ErrUnimplemented,
		proto.CodeInternal: handler.ErrInternal, proto.CodeUnavailable: handler.ErrUnavailable,
		proto.CodeDataLoss: handler.ErrDataLoss, proto.CodeUnauthenticated: handler.ErrUnauthenticated,
	}
	for code := proto.CodeCanceled; code <= proto.CodeUnauthenticated; code++ {
		err := c.Call(ctx, "Fail/With", code, nil)
		var e *handler.Error
		if !errors.As(err, &e) || e.Code != code || e.Message != fmt.Sprintf("failed with %d", code) || e.Unprocessed {
			t.Errorf("code %v: got %#v", code, err)
			continue
		}
		if !errors.Is(err, sentinels[code]) {
			t.Errorf("code %v: errors.Is(err, sentinel) = false", code)
		}
	}
	// A plain error from a handler arrives as Unknown with its text.
	reg.Handle("Fail/Plain", handler.Func(func(context.Context, struct{}) (int, error) { return 0, errors.New("disk on fire") }))
	err := c.Call(ctx, "Fail/Plain", nil, nil)
	if !errors.Is(err, handler.ErrUnknown) || err.Error() != "rpcd: unknown: disk on fire" {
		t.Fatalf("plain error: %v", err)
	}
}

func TestUnknownRouteAndBadArguments(t *testing.T) {
	reg := builtinRegistry()
	var ran atomic.Int32
	reg.Handle("Counted/Sum", handler.Func(func(_ context.Context, in builtin.SumArgs) (int64, error) {
		ran.Add(1)
		return in.A + in.B, nil
	}))
	s := start(t, reg, reactor.Options{})
	c := dial(t, s, client.Options{})
	healthy{t, c}.check() // taken in before the baseline
	h := newHealthy(t, s)
	baseline(t)
	ctx := ctxT(t)

	err := c.Call(ctx, "No/Such", nil, nil)
	var e *handler.Error
	if !errors.As(err, &e) || e.Code != proto.CodeNotFound || !e.Unprocessed || !strings.Contains(e.Message, "No/Such") {
		t.Fatalf("unknown route: %#v", err)
	}
	_, err = c.CallRaw(ctx, "Counted/Sum", []byte(`{"a":1,`), nil)
	if !errors.Is(err, handler.ErrInvalidArgument) {
		t.Fatalf("raw codec to a JSON route: %v", err)
	}
	err = c.Call(ctx, "Counted/Sum", json(`{"a":"one"}`), nil)
	if !errors.Is(err, handler.ErrInvalidArgument) || !handler.IsUnprocessed(err) {
		t.Fatalf("malformed arguments: %#v; want InvalidArgument, unprocessed", err)
	}
	if ran.Load() != 0 {
		t.Fatalf("handler ran %d times on bad arguments", ran.Load())
	}
	var sum int64
	if err := c.Call(ctx, "Counted/Sum", builtin.SumArgs{A: 2, B: 2}, &sum); err != nil || sum != 4 {
		t.Fatalf("good call after bad ones: %d, %v", sum, err)
	}
	h.check()
}

// json is a pre-encoded JSON argument.
type json string

func (j json) MarshalJSON() ([]byte, error) { return []byte(j), nil }

func TestHandlerPanic(t *testing.T) {
	reg := builtinRegistry()
	reg.HandleFunc("Panic/Inline", func(context.Context, []byte, []byte) ([]byte, error) { panic("inline boom") })
	reg.HandleFunc("Panic/Blocking", func(context.Context, []byte, []byte) ([]byte, error) { panic("pool boom") }, handler.Blocking())
	var logs syncBuffer
	s := start(t, reg, reactor.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	c := dial(t, s, client.Options{})
	other := dial(t, s, client.Options{})
	healthy{t, c}.check() // both connections taken in before the baseline
	healthy{t, other}.check()
	baseline(t)
	ctx := ctxT(t)
	for _, route := range []string{"Panic/Inline", "Panic/Blocking"} {
		_, err := c.CallRaw(ctx, route, nil, nil)
		if !errors.Is(err, handler.ErrInternal) || !strings.Contains(err.Error(), "boom") {
			t.Fatalf("%s: %v", route, err)
		}
		for _, cl := range []*client.Client{c, other} {
			if reply, err := cl.CallRaw(ctx, builtin.EchoPacket, []byte("alive"), nil); err != nil || string(reply) != "alive" {
				t.Fatalf("after %s: %q, %v", route, reply, err)
			}
		}
		// The server's logger has the panic with its stack.
		if log := logs.String(); !strings.Contains(log, "handler panicked\" route="+route) || !strings.Contains(log, "runtime/debug.Stack") {
			t.Fatalf("no panic log with a stack for %s in:\n%s", route, log)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCallContext: the handler sees the route, id, metadata, remote address
// and the caller's deadline.
func TestCallContext(t *testing.T) {
	reg := handler.NewRegistry()
	type seen struct {
		Route, Tenant, Remote string
		ID                    uint32
		DeadlineMS            int64
	}
	reg.Handle("Who/Am", handler.Func(func(ctx context.Context, _ struct{}) (seen, error) {
		c := handler.CallFrom(ctx)
		tenant, _ := c.Metadata.Get("tenant")
		var left int64 = -1
		if dl, ok := ctx.Deadline(); ok {
			left = time.Until(dl).Milliseconds()
		}
		return seen{Route: c.Route, Tenant: string(tenant), Remote: c.Remote.String(), ID: c.ID, DeadlineMS: left}, nil
	}))
	s := start(t, reg, reactor.Options{})
	c := dial(t, s, client.Options{})
	ctx, cancel := context.WithTimeout(client.WithMetadata(context.Background(), "tenant", "acme"), 3*time.Second)
	defer cancel()
	var got seen
	if err := c.Call(ctx, "Who/Am", nil, &got); err != nil {
		t.Fatal(err)
	}
	if got.Route != "Who/Am" || got.Tenant != "acme" || got.ID == 0 || !strings.HasPrefix(got.Remote, "127.0.0.1:") {
		t.Fatalf("handler saw %+v", got)
	}
	if got.DeadlineMS <= 0 || got.DeadlineMS > 3000 {
		t.Fatalf("handler saw %d ms to its deadline, want within (0, 3000]", got.DeadlineMS)
	}
	if err := c.Call(context.Background(), "Who/Am", nil, &got); err != nil || got.DeadlineMS != -1 {
		t.Fatalf("call without a deadline: handler saw %d ms, %v", got.DeadlineMS, err)
	}
}

// blocker is a Blocking route that waits for its context and reports how it
// ended.
type blocker struct {
	started chan struct{}
	ended   chan error
}

func newBlocker(reg *handler.Registry, route string) *blocker {
	b := &blocker{started: make(chan struct{}, 100), ended: make(chan error, 100)}
	reg.HandleFunc(route, func(ctx context.Context, _, reply []byte) ([]byte, error) {
		b.started <- struct{}{}
		select {
		case <-ctx.Done():
			b.ended <- ctx.Err()
			return reply, ctx.Err()
		case <-time.After(20 * time.Second):
			b.ended <- errors.New("never cancelled")
			return reply, nil
		}
	}, handler.Blocking())
	return b
}

func TestClientCancelReachesHandler(t *testing.T) {
	reg := builtinRegistry()
	b := newBlocker(reg, "Block/Forever")
	s := start(t, reg, reactor.Options{})
	c := dial(t, s, client.Options{})

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := c.CallRaw(ctx, "Block/Forever", nil, nil); errc <- err }()
	<-b.started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) || !errors.Is(err, handler.ErrCanceled) {
		t.Fatalf("cancelled call returned %v", err)
	}
	select {
	case err := <-b.ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("handler's context ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's context was not cancelled")
	}
	// The cancelled caller read the connection itself, under a read
	// deadline it left set: the connection (over TLS too) serves on.
	if reply, err := c.CallRaw(context.Background(), builtin.EchoPacket, []byte("after"), nil); err != nil || string(reply) != "after" {
		t.Fatalf("the next call on the connection: %q, %v", reply, err)
	}
}

func TestDeadlineExceeded(t *testing.T) {
	reg := builtinRegistry()
	b := newBlocker(reg, "Block/Forever")
	s := start(t, reg, reactor.Options{})
	c := dial(t, s, client.Options{})
	healthy{t, c}.check() // taken in before the baseline
	h := newHealthy(t, s)
	baseline(t)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := c.CallRaw(ctx, "Block/Forever", nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, handler.ErrDeadlineExceeded) {
		t.Fatalf("call past its deadline returned %v", err)
	}
	if waited := time.Since(begin); waited > 5*time.Second {
		t.Fatalf("the caller waited %v past a 100ms deadline", waited)
	}
	select {
	case err := <-b.ended:
		if err == nil || err.Error() == "never cancelled" {
			t.Fatalf("handler's context ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's context did not end at the deadline")
	}
	h.check()
}

func TestBlockingInflightLimit(t *testing.T) {
	reg := builtinRegistry()
	b := newBlocker(reg, "Block/Forever")
	s := start(t, reg, reactor.Options{MaxInflight: 2})
	c := dial(t, s, client.Options{})
	other := dial(t, s, client.Options{})
	healthy{t, c}.check() // both connections taken in before the baseline
	healthy{t, other}.check()
	baseline(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var held sync.WaitGroup
	for range 2 {
		held.Add(1)
		go func() { defer held.Done(); c.CallRaw(ctx, "Block/Forever", nil, nil) }()
		<-b.started
	}
	_, err := c.CallRaw(ctxT(t), "Block/Forever", nil, nil)
	var e *handler.Error
	if !errors.As(err, &e) || e.Code != proto.CodeResourceExhausted || !e.Unprocessed {
		t.Fatalf("third call on a full connection: %#v", err)
	}
	// Inline routes on the same connection and other connections still work.
	if _, err := c.CallRaw(ctxT(t), builtin.EchoPacket, []byte("x"), nil); err != nil {
		t.Fatalf("inline call beside the full pool slots: %v", err)
	}
	go func() { other.CallRaw(ctx, "Block/Forever", nil, nil) }()
	select {
	case <-b.started:
	case <-time.After(5 * time.Second):
		t.Fatal("another connection's blocking call did not start")
	}
	cancel()
	held.Wait()
}

func TestNotify(t *testing.T) {
	reg := handler.NewRegistry()
	got := make(chan string, 10)
	reg.Handle("Log/Write", handler.Func(func(_ context.Context, line string) (struct{}, error) {
		got <- line
		return struct{}{}, nil
	}))
	reg.HandleFunc("Log/Fail", func(context.Context, []byte, []byte) ([]byte, error) {
		return nil, errors.New("never reported")
	})
	s := start(t, reg, reactor.Options{})
	c := dial(t, s, client.Options{})
	ctx := ctxT(t)
	if err := c.Notify(ctx, "Log/Fail", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Notify(ctx, "No/Such", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Notify(ctx, "Log/Write", "hello"); err != nil {
		t.Fatal(err)
	}
	select {
	case line := <-got:
		if line != "hello" {
			t.Fatalf("handler got %q", line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("one-way call never arrived")
	}
}

func TestFutures(t *testing.T) {
	s := start(t, builtinRegistry(), reactor.Options{})
	c := dial(t, s, client.Options{})
	ctx := ctxT(t)
	var futs []*client.Future
	sums := make([]int64, 50)
	for i := range sums {
		futs = append(futs, c.Go(ctx, builtin.Sum, builtin.SumArgs{A: int64(i), B: 1}, &sums[i]))
	}
	raw := c.GoRaw(ctx, builtin.EchoPacket, []byte("async"))
	for i, f := range futs {
		if err := f.Wait(); err != nil || sums[i] != int64(i+1) {
			t.Fatalf("future %d: %d, %v", i, sums[i], err)
		}
	}
	<-raw.Done()
	if err := raw.Wait(); err != nil || string(raw.Reply()) != "async" {
		t.Fatalf("raw future: %q, %v", raw.Reply(), err)
	}
	if err := c.Go(ctx, "No/Such", nil, nil).Wait(); !errors.Is(err, handler.ErrNotFound) {
		t.Fatalf("future of an unknown route: %v", err)
	}
}

// rawConn is a test peer that speaks frames by hand.
type rawConn struct {
	t  testing.TB
	nc net.Conn
	in []byte
}

func dialRaw(t testing.TB, s *reactor.Server) *rawConn {
	var nc net.Conn
	var err error
	switch {
	case overTLS:
		nc, err = tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", s.Addr().String(), clientTLS(t, false))
	case overWS:
		nc, err = wsDial(t, s)(context.Background(), "")
	default:
		nc, err = net.DialTimeout("tcp", s.Addr().String(), 5*time.Second)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

// send writes b. Over WebSocket a write after the server closed fails
// where TCP's kernel would have taken the bytes (a GoAway and close may
// come between two frames of b, each a message of its own), so there the
// error is logged and what the server sent is left to next to read.
func (r *rawConn) send(b []byte) {
	r.t.Helper()
	if _, err := r.nc.Write(b); err != nil {
		if overWS {
			r.t.Logf("a write after the server closed the WebSocket: %v", err)
			return
		}
		r.t.Fatal(err)
	}
}

// next reads the next frame; io.EOF when the server closed.
func (r *rawConn) next() (proto.Frame, error) {
	f, err := r.nextWithin(5 * time.Second)
	if errors.Is(err, proto.ErrProtocol) {
		r.t.Fatal(err) // the server wrote bytes that are not frames
	}
	return f, err
}

// TestPipelinedRequests: requests written back to back in one write all
// come back, matched by id.
func TestPipelinedRequests(t *testing.T) {
	s := start(t, builtinRegistry(), reactor.Options{})
	r := dialRaw(t, s)
	var batch []byte
	const n = 500
	for i := 1; i <= n; i++ {
		batch = proto.AppendFrame(batch, proto.Header{Kind: proto.KindRequest, ID: uint32(i)}, builtin.EchoPacket, nil, fmt.Appendf(nil, "%d", i))
	}
	r.send(batch)
	for i := 1; i <= n; i++ {
		f, err := r.next()
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if f.Kind != proto.KindResponse || f.ID != uint32(i) || string(f.Payload) != fmt.Sprint(i) {
			t.Fatalf("reply %d: %v id %d %q", i, f.Kind, f.ID, f.Payload)
		}
	}
	r.send(proto.AppendPing(nil, []byte("are you there")))
	if f, err := r.next(); err != nil || f.Kind != proto.KindPong || string(f.Payload) != "are you there" {
		t.Fatalf("ping: %v %q %v", f.Kind, f.Payload, err)
	}

	// Large frames among small ones, all in one write: each large one is
	// read apart and echoed from its own buffer, and the replies keep the
	// requests' order.
	batch = batch[:0]
	var want [][]byte
	for i := 1; i <= 9; i++ {
		p := fmt.Appendf(nil, "%d", i)
		if i%3 == 2 { // 400, 250 and 100 KiB: a later one may get an earlier one's larger buffer
			p = bytes.Repeat(p, (550-150*(i+1)/3)<<10)
		}
		want = append(want, p)
		batch = proto.AppendFrame(batch, proto.Header{Kind: proto.KindRequest, ID: uint32(n + i)}, builtin.EchoPacket, nil, p)
	}
	sent := make(chan error, 1)
	go func() { // the server answers while the rest is still on its way
		_, err := r.nc.Write(batch)
		sent <- err
	}()
	for i, p := range want {
		f, err := r.next()
		if err != nil || f.Kind != proto.KindResponse || f.ID != uint32(n+i+1) || !bytes.Equal(f.Payload, p) {
			t.Fatalf("reply %d among large frames: %v id %d, %d bytes, %v", i+1, f.Kind, f.ID, len(f.Payload), err)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}

// TestBadPeerIsolated: a peer that breaks the protocol is told why and cut
// off; a client on another connection never notices.
func TestBadPeerIsolated(t *testing.T) {
	s := start(t, builtinRegistry(), reactor.Options{})
	h := newHealthy(t, s)
	baseline(t)
	cases := map[string][]byte{
		"bad magic": []byte("GET / HTTP/1.1\r\nHost: rpcd\r\n\r\n"),
		"huge length": func() []byte {
			b := proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, "A/B", nil, nil)[:proto.HeaderSize]
			b[20], b[21], b[22], b[23] = 0xFF, 0xFF, 0xFF, 0xFF
			return b
		}(),
		"wrong version": func() []byte {
			b := proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, "A/B", nil, nil)
			b[2] = 9
			return b
		}(),
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			r := dialRaw(t, s)
			r.send(bad)
			f, err := r.next()
			if err != nil || f.Kind != proto.KindGoAway {
				t.Fatalf("answer to garbage: %v, %v", f.Kind, err)
			}
			if _, code, _ := f.GoAwayBody(); code != proto.CodeInternal {
				t.Fatalf("go-away code %v", code)
			}
			if _, err := r.next(); !errors.Is(err, io.EOF) {
				t.Fatalf("connection not closed after go-away: %v", err)
			}
			h.check()
		})
	}
}

// TestShutdownAnswersCallsInFlight: calls running when Shutdown starts all
// get their replies; calls after it are refused as unprocessed.
func TestShutdownAnswersCallsInFlight(t *testing.T) {
	reg := builtinRegistry()
	release := make(chan struct{})
	started := make(chan struct{}, 100)
	reg.HandleFunc("Slow/Echo", func(_ context.Context, req, reply []byte) ([]byte, error) {
		started <- struct{}{}
		<-release
		return append(reply, req...), nil
	}, handler.Blocking())
	s := newServer(t, reg, reactor.Options{})
	served := make(chan error, 1)
	go func() { served <- s.ListenAndServe("127.0.0.1:0") }()
	for s.Addr() == nil {
		time.Sleep(time.Millisecond)
	}
	c := dial(t, s, client.Options{})
	raw := dialRaw(t, s)

	const n = 20
	results := make(chan error, n)
	for i := range n {
		go func() {
			req := fmt.Appendf(nil, "call %d", i)
			reply, err := c.CallRaw(ctxT(t), "Slow/Echo", req, nil)
			if err == nil && !bytes.Equal(reply, req) {
				err = fmt.Errorf("sent %q, got %q", req, reply)
			}
			results <- err
		}()
	}
	for range n {
		<-started
	}
	raw.send(proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, builtin.EchoPacket, nil, []byte("before")))
	if f, err := raw.next(); err != nil || f.Kind != proto.KindResponse {
		t.Fatalf("raw call before shutdown: %v %v", f.Kind, err)
	}

	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- s.Shutdown(ctx)
	}()
	// The raw peer is told which of its calls will be answered.
	f, err := raw.next()
	if err != nil || f.Kind != proto.KindGoAway {
		t.Fatalf("expected go-away, got %v %v", f.Kind, err)
	}
	if last, code, _ := f.GoAwayBody(); last != 1 || code != proto.CodeUnavailable {
		t.Fatalf("go-away last %d code %v", last, code)
	}
	raw.send(proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 2}, builtin.EchoPacket, nil, []byte("after")))
	f, err = raw.next()
	if err != nil || f.Kind != proto.KindError || f.Flags != proto.FlagUnprocessed {
		t.Fatalf("call after go-away: %v flags %v, %v", f.Kind, f.Flags, err)
	}
	if code, _ := f.ErrorBody(); code != proto.CodeUnavailable {
		t.Fatalf("call after go-away: code %v", code)
	}
	// New calls from the client are refused at once, as unprocessed.
	if err := c.Call(ctxT(t), builtin.Ping, nil, nil); !errors.Is(err, handler.ErrUnavailable) {
		t.Fatalf("new call while draining: %v", err)
	}
	close(release)
	for range n {
		if err := <-results; err != nil {
			t.Errorf("call in flight at shutdown: %v", err)
		}
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-served; !errors.Is(err, reactor.ErrServerClosed) {
		t.Fatalf("ListenAndServe returned %v", err)
	}
	if _, err := net.DialTimeout("tcp", s.Addr().String(), time.Second); err == nil {
		t.Fatal("still accepting connections after Shutdown")
	}
}

// TestShutdownTimeout: a handler that never returns cannot hold Shutdown
// past its context; its context is cancelled.
func TestShutdownTimeout(t *testing.T) {
	reg := builtinRegistry()
	b := newBlocker(reg, "Block/Forever")
	s := newServer(t, reg, reactor.Options{})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	c := dial(t, s, client.Options{})
	errc := make(chan error, 1)
	go func() { _, err := c.CallRaw(context.Background(), "Block/Forever", nil, nil); errc <- err }()
	<-b.started
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown past its deadline returned %v", err)
	}
	select {
	case <-b.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the stuck handler's context was not cancelled")
	}
	if err := <-errc; !errors.Is(err, handler.ErrUnavailable) {
		t.Fatalf("the stuck call returned %v", err)
	}
}

func TestStartErrors(t *testing.T) {
	s := start(t, builtinRegistry(), reactor.Options{})
	taken := reactor.New(builtinRegistry(), reactor.Options{})
	if err := taken.Start(s.Addr().String()); err == nil {
		taken.Shutdown(context.Background())
		t.Fatal("listening on a taken port succeeded")
	}
	if err := s.Start("127.0.0.1:0"); err == nil {
		t.Fatal("a second Start succeeded")
	}
}
