package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/leaktest"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	leaktest.VerifyTestMain(m)
}

// server serves the built-in routes and a blocking route that holds until
// its context ends.
func server(t testing.TB, addr string) *reactor.Server {
	t.Helper()
	reg := handler.NewRegistry()
	builtin.Register(reg)
	reg.HandleFunc("Block/Forever", func(ctx context.Context, _, reply []byte) ([]byte, error) {
		<-ctx.Done()
		return reply, ctx.Err()
	}, handler.Blocking())
	s := reactor.New(reg, reactor.Options{})
	if err := s.Start(addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, s) })
	return s
}

func stop(t testing.TB, s *reactor.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

func dial(t testing.TB, addr string, opts client.Options) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestDialRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = client.Dial(context.Background(), addr, client.Options{})
	if !errors.Is(err, handler.ErrUnavailable) {
		t.Fatalf("Dial to a closed port: %v", err)
	}
}

// TestPendingTableEmpties: after replies, timeouts, cancels and a lost
// connection, no call is left in the table.
func TestPendingTableEmpties(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	c := dial(t, s.Addr().String(), client.Options{Conns: 2})
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch i % 4 {
			case 0:
				c.CallRaw(ctx, builtin.EchoPacket, []byte("x"), nil)
			case 1:
				tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
				defer cancel()
				if _, err := c.CallRaw(tctx, "Block/Forever", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("timed-out call: %v", err)
				}
			case 2:
				cctx, cancel := context.WithCancel(ctx)
				time.AfterFunc(10*time.Millisecond, cancel)
				if _, err := c.CallRaw(cctx, "Block/Forever", nil, nil); !errors.Is(err, context.Canceled) {
					t.Errorf("cancelled call: %v", err)
				}
			case 3:
				c.Call(ctx, "No/Such", nil, nil)
			}
		}()
	}
	wg.Wait()
	if n := client.Pending(c); n != 0 {
		t.Fatalf("%d calls left pending after replies, timeouts and cancels", n)
	}

	// Calls in flight when the connection dies fail with Unavailable.
	errc := make(chan error, 10)
	for range 10 {
		go func() { _, err := c.CallRaw(ctx, "Block/Forever", nil, nil); errc <- err }()
	}
	// Sent, and running on the server: a Shutdown before the server has
	// read them would refuse them instead.
	waitFor(t, func() bool { return client.Pending(c) == 10 && s.Stats().Blocking == 10 })
	// The handlers never return, so the drain times out and the server
	// closes the connections under the calls.
	shutCtx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(shutCtx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with stuck handlers: %v", err)
	}
	for range 10 {
		if err := <-errc; !errors.Is(err, handler.ErrUnavailable) {
			t.Errorf("call on a lost connection: %v", err)
		}
	}
	if n := client.Pending(c); n != 0 {
		t.Fatalf("%d calls left pending after the connection was lost", n)
	}
}

// TestLargeCallsInFlight: large calls queued behind one another's writes
// on one connection (their frames copied into the write queue, whose
// buffers large frames grow and bigBufs keeps) all come back whole, each
// its own.
func TestLargeCallsInFlight(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	c := dial(t, s.Addr().String(), client.Options{Conns: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a frame lost: calls that never end
	defer cancel()
	var wg sync.WaitGroup
	for caller := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var reply []byte
			for round := range 40 {
				size := 16 + caller // small frames, queued before large ones
				if (caller+round)%3 == 0 {
					size = (200 + 150*((caller+round)%7)) << 10 // 200 KiB to 1.1 MiB
				}
				req := make([]byte, size)
				for i := range req {
					req[i] = byte(i*7 + caller*31 + round)
				}
				var err error
				if reply, err = c.CallRaw(ctx, builtin.EchoPacket, req, reply[:0]); err != nil || !bytes.Equal(reply, req) {
					t.Errorf("caller %d, round %d: %d of %d bytes back, %v", caller, round, len(reply), len(req), err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestReconnect: calls fail fast while the server is down and succeed again
// once it is back, without a new Dial.
func TestReconnect(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	addr := s.Addr().String()
	c := dial(t, addr, client.Options{MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	ctx := context.Background()
	if _, err := c.CallRaw(ctx, builtin.EchoPacket, []byte("up"), nil); err != nil {
		t.Fatal(err)
	}
	stop(t, s)

	begin := time.Now()
	_, err := c.CallRaw(ctx, builtin.EchoPacket, []byte("down"), nil)
	var e *handler.Error
	if !errors.As(err, &e) || e.Code != proto.CodeUnavailable || !e.Unprocessed {
		t.Fatalf("call with the server down: %#v", err)
	}
	// Fails at once rather than waiting for a reconnection: far under the
	// 5s a dial may take, with room for a loaded machine.
	if d := time.Since(begin); d > 3*time.Second {
		t.Fatalf("call with the server down took %v; it should fail fast", d)
	}

	server(t, addr) // back on the same port
	waitFor(t, func() bool {
		_, err := c.CallRaw(ctx, builtin.EchoPacket, []byte("again"), nil)
		return err == nil
	})
}

// fakeServer accepts connections on loopback and hands each to serve.
func fakeServer(t testing.TB, serve func(nc net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); defer nc.Close(); serve(nc) }()
		}
	}()
	return ln.Addr().String()
}

// readFrame reads one frame from nc.
func readFrame(nc net.Conn) (proto.Frame, error) {
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var buf []byte
	tmp := make([]byte, 4096)
	for {
		if f, n, err := proto.Decode(buf, nil); err != nil || n > 0 {
			return f, err
		}
		n, err := nc.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if err != nil {
			return proto.Frame{}, err
		}
	}
}

// TestGoAwayFromServer: after GoAway the client sends no new call on that
// connection; when the connection then closes, calls after the GoAway's
// last id are known unprocessed and the others are not. Retries are off
// here, so the errors show how the connection's end classed each call;
// TestGoAwayRetries has them on.
func TestGoAwayFromServer(t *testing.T) {
	conns := make(chan int, 4)
	var mu sync.Mutex
	n := 0
	addr := fakeServer(t, func(nc net.Conn) {
		mu.Lock()
		n++
		me := n
		mu.Unlock()
		conns <- me
		if me > 1 { // later connections answer Pings with their number
			for {
				f, err := readFrame(nc)
				if err != nil {
					return
				}
				nc.Write(proto.AppendFrame(nil, proto.Header{Kind: proto.KindResponse, Codec: f.Codec, ID: f.ID}, "", nil, []byte{'0' + byte(me)}))
			}
		}
		// The first takes two calls, answers neither, goes away naming
		// the first as the last it will process, then closes.
		f1, err1 := readFrame(nc)
		f2, err2 := readFrame(nc)
		if err1 != nil || err2 != nil {
			t.Errorf("reading calls: %v %v", err1, err2)
			return
		}
		nc.Write(proto.AppendGoAway(nil, f1.ID, proto.CodeUnavailable, "restarting"))
		time.Sleep(50 * time.Millisecond)
		_ = f2
	})
	c := dial(t, addr, client.Options{MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, MaxRetries: -1})
	<-conns
	first := make(chan error, 1)
	go func() { _, err := c.CallRaw(context.Background(), "Slow/One", nil, nil); first <- err }()
	waitFor(t, func() bool { return client.Pending(c) == 1 })
	_, err2 := c.CallRaw(context.Background(), "Slow/Two", nil, nil)
	err1 := <-first
	var e1, e2 *handler.Error
	if !errors.As(err1, &e1) || e1.Code != proto.CodeUnavailable || e1.Unprocessed {
		t.Fatalf("call named by the go-away: %#v; want unavailable, fate unknown", err1)
	}
	if !errors.As(err2, &e2) || e2.Code != proto.CodeUnavailable || !e2.Unprocessed {
		t.Fatalf("call after the go-away's last id: %#v; want unavailable and unprocessed", err2)
	}
	// The client redials by itself; calls then go to the new connection.
	waitFor(t, func() bool {
		reply, err := c.CallRaw(context.Background(), "Any/Route", nil, nil)
		return err == nil && string(reply) == "2"
	})
}

func TestCloseFailsPending(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	c, err := client.Dial(context.Background(), s.Addr().String(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { _, err := c.CallRaw(context.Background(), "Block/Forever", nil, nil); errc <- err }()
	waitFor(t, func() bool { return client.Pending(c) == 1 })
	c.Close()
	if err := <-errc; !errors.Is(err, handler.ErrUnavailable) {
		t.Fatalf("pending call at Close: %v", err)
	}
	if _, err := c.CallRaw(context.Background(), builtin.EchoPacket, nil, nil); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("call after Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestCallValidation(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	c := dial(t, s.Addr().String(), client.Options{Limits: proto.Limits{MaxFrameSize: 1024}})
	ctx := context.Background()
	if _, err := c.CallRaw(ctx, "bad route", nil, nil); !errors.Is(err, handler.ErrInvalidArgument) {
		t.Fatalf("route with a space: %v", err)
	}
	if _, err := c.CallRaw(ctx, builtin.EchoPacket, make([]byte, 2000), nil); !errors.Is(err, handler.ErrResourceExhausted) {
		t.Fatalf("request over the client's frame limit: %v", err)
	}
	past, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	if _, err := c.CallRaw(past, builtin.EchoPacket, nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call with a passed deadline: %v", err)
	}
	if err := c.Call(ctx, builtin.Sum, func() {}, nil); !errors.Is(err, handler.ErrInvalidArgument) {
		t.Fatalf("argument that does not encode: %v", err)
	}
	var wrong struct{ X string }
	if err := c.Call(ctx, builtin.Sum, builtin.SumArgs{A: 1}, &wrong); !errors.Is(err, handler.ErrInvalidArgument) {
		t.Fatalf("reply into the wrong type: %v", err)
	}
}

func TestTimeoutOption(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	c := dial(t, s.Addr().String(), client.Options{Timeout: 50 * time.Millisecond})
	if _, err := c.CallRaw(context.Background(), "Block/Forever", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call under Options.Timeout: %v", err)
	}
	f := c.GoRaw(context.Background(), "Block/Forever", nil)
	if err := f.Wait(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("future under Options.Timeout: %v", err)
	}
	if n := client.Pending(c); n != 0 {
		t.Fatalf("%d calls left pending", n)
	}
}

// TestRawCallAllocs: a raw call with a reply buffer allocates at most once,
// counting the client and the in-process server together: none of its own,
// and under Options.Timeout with a context that never ends, its deadline's
// context (timeout.go), not a context and a timer of the time package's
// (four allocations).
func TestRawCallAllocs(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	shared, cancel := context.WithCancel(context.Background())
	defer cancel()
	perCall := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), time.Minute)
	}
	ctxAllocs := testing.AllocsPerRun(2000, func() { _, cancel := perCall(); cancel() })
	for _, tc := range []struct {
		name    string
		opts    client.Options
		ctx     context.Context // nil: one from perCall for every call
		max     float64         // under the race detector, whose pools drop items, one more
		context string
	}{
		{"no timeout", client.Options{}, context.Background(), 0, ""},
		{"Options.Timeout", client.Options{Timeout: 5 * time.Second}, context.Background(), 1, ""},
		{"a shared cancellable context", client.Options{}, shared, 0, ""},
		// The context's own allocations are the caller's; the client adds none.
		{"a context per call", client.Options{}, nil, ctxAllocs, " (the context's own)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, s.Addr().String(), tc.opts)
			req := make([]byte, 16)
			reply := make([]byte, 0, 64)
			call := func() {
				ctx := tc.ctx
				if ctx == nil {
					var cancel context.CancelFunc
					ctx, cancel = perCall()
					defer cancel()
				}
				var err error
				if reply, err = c.CallRaw(ctx, builtin.EchoPacket, req, reply[:0]); err != nil {
					t.Fatal(err)
				}
			}
			for range 100 { // warm the pools
				call()
			}
			allocs := testing.AllocsPerRun(2000, call)
			limit := tc.max
			if raceOn {
				limit++
			}
			if client.OnEventLoops() && tc.name != "no timeout" && tc.name != "a shared cancellable context" {
				// No caller reads for itself on a loop: each waits on its
				// context's Done, which a context made per call (or by
				// Options.Timeout) makes on the first ask.
				limit++
			}
			if allocs > limit {
				t.Fatalf("%.2f allocations per raw call, want at most %.0f%s", allocs, limit, tc.context)
			}
			t.Logf("%.2f allocations per raw call (client and server)", allocs)
		})
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDeadlineWhileWriting: a server that stops reading cannot hold a
// caller past its deadline, even while the caller is the one writing.
func TestDeadlineWhileWriting(t *testing.T) {
	hold := make(chan struct{})
	addr := fakeServer(t, func(nc net.Conn) { <-hold }) // accepts, never reads
	defer close(hold)
	c := dial(t, addr, client.Options{})
	big := make([]byte, 3<<20) // more than the socket buffers take
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		begin := time.Now()
		_, err := c.CallRaw(ctx, builtin.EchoPacket, big, nil)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("call %d to a server that does not read: %v", i, err)
		}
		if d := time.Since(begin); d > 5*time.Second { // not held until the server reads
			t.Fatalf("call %d returned %v after its 200ms deadline", i, d)
		}
	}
}

// TestMemoryPerConn bounds what a connection costs the client: heap in use
// and goroutine stacks over 200 clients of one connection each, a call made
// on each, under 40 KiB a connection, the in-process server's share (about
// 2 KiB) included. It was about 90 KiB with a 64 KiB read buffer per
// connection; the buffer now starts at 4 KiB and grows with the replies.
func TestMemoryPerConn(t *testing.T) {
	if testing.Short() || raceOn {
		t.Skip("opens 200 connections; the race detector adds to their memory")
	}
	s := server(t, "127.0.0.1:0")
	mem := func() int64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapInuse + ms.StackInuse)
	}
	// The tests before may leave goroutines ending, whose stacks and
	// buffers would be freed during the count: wait for them first.
	for i, last := 0, -1; i < 100 && runtime.NumGoroutine() != last; i++ {
		last = runtime.NumGoroutine()
		time.Sleep(20 * time.Millisecond)
	}
	const n = 200
	before := mem()
	cs := make([]*client.Client, 0, n)
	for range n {
		c := dial(t, s.Addr().String(), client.Options{})
		if _, err := c.CallRaw(context.Background(), builtin.EchoPacket, []byte("0123456789abcdef"), nil); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	per := float64(mem()-before) / n
	runtime.KeepAlive(cs)
	t.Logf("%.1f KiB of heap and stacks per connection", per/1024)
	if per > 40<<10 {
		t.Errorf("%.1f KiB per connection, want under 40", per/1024)
	}
}
