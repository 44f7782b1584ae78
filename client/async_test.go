package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
)

// echoesAsync starts n asynchronous echoes at once, the i-th of the bytes
// call(i) returns through its client under its context, and fails t if
// any fails or is answered with other bytes than its own.
func echoesAsync(t *testing.T, n int, call func(i int) (*client.Client, context.Context, []byte)) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Add(n)
	errs := make(chan error, n)
	for i := range n {
		c, ctx, req := call(i)
		c.CallRawAsync(ctx, builtin.EchoPacket, req, nil, func(reply []byte, err error) {
			defer wg.Done()
			if err == nil && !bytes.Equal(reply, req) {
				err = fmt.Errorf("reply %q to %q", reply, req)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestCallRawAsync: calls started from one goroutine complete with their
// own replies; calls their done functions start (a closed loop of virtual
// callers, as the load generator runs) complete too; typed calls decode.
func TestCallRawAsync(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	c := dial(t, s.Addr().String(), client.Options{})
	ctx := ctxFor(t, 20*time.Second)

	echoesAsync(t, 500, func(i int) (*client.Client, context.Context, []byte) {
		return c, ctx, []byte{byte(i), byte(i >> 8)}
	})

	// 16 callers, each starting its next call from the last one's done.
	const callers, each = 16, 200
	var left sync.WaitGroup
	left.Add(callers)
	var done atomic.Int64
	for i := range callers {
		req := []byte{byte(i)}
		reply := make([]byte, 0, 8)
		var next func([]byte, error)
		k := 0
		next = func(got []byte, err error) {
			if err != nil || string(got) != string(req) {
				t.Errorf("caller %d, call %d: %q, %v", i, k, got, err)
				left.Done()
				return
			}
			done.Add(1)
			if k++; k == each {
				left.Done()
				return
			}
			c.CallRawAsync(ctx, builtin.EchoPacket, req, reply[:0], next)
		}
		c.CallRawAsync(ctx, builtin.EchoPacket, req, reply[:0], next)
	}
	left.Wait()
	if done.Load() != callers*each {
		t.Fatalf("%d calls completed, want %d", done.Load(), callers*each)
	}

	var sum int64
	got := make(chan error, 1)
	c.CallAsync(ctx, builtin.Sum, builtin.SumArgs{A: 40, B: 2}, &sum, func(err error) { got <- err })
	if err := <-got; err != nil || sum != 42 {
		t.Fatalf("typed: %d, %v", sum, err)
	}
}

// TestCallRawAsyncErrors: a route the server lacks fails NotFound; a bad
// route fails before CallRawAsync returns; Options.Timeout ends a call the
// server holds (the sweep), and the server hears of it; a cancelled
// context ends one; a closed client's calls fail with ErrClosed.
func TestCallRawAsyncErrors(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	c := dial(t, s.Addr().String(), client.Options{Timeout: 200 * time.Millisecond})
	ctx := context.Background()
	call := func(ctx context.Context, route string) error {
		ch := make(chan error, 1)
		c.CallRawAsync(ctx, route, nil, nil, func(_ []byte, err error) { ch <- err })
		return <-ch
	}

	if err := call(ctx, "No/Such"); !errors.Is(err, handler.ErrNotFound) || !handler.IsUnprocessed(err) {
		t.Fatalf("no route: %v", err)
	}
	returned := false
	c.CallRawAsync(ctx, "bad route", nil, nil, func(_ []byte, err error) {
		if returned || handler.CodeOf(err) != proto.CodeInvalidArgument {
			t.Errorf("bad route: %v, completed after returning: %v", err, returned)
		}
	})
	returned = true

	begin := time.Now()
	if err := call(ctx, "Block/Forever"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("held past Options.Timeout: %v", err)
	}
	if d := time.Since(begin); d < 200*time.Millisecond {
		t.Fatalf("ended after %v, before its deadline", d)
	}
	waitFor(t, func() bool { return s.Stats().Blocking == 0 }) // the server's handler was cancelled

	cctx, cancel := context.WithCancel(ctx)
	ch := make(chan error, 1)
	c.CallRawAsync(cctx, "Block/Forever", nil, nil, func(_ []byte, err error) { ch <- err })
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-ch; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}

	c.Close()
	if err := call(ctx, builtin.EchoPacket); err != client.ErrClosed {
		t.Fatalf("closed client: %v", err)
	}
}

// TestCallRawAsyncRetry: a call the server refuses unprocessed is sent
// again, as Call's is, the same request (codec, metadata, payload), and
// completes with the reply.
func TestCallRawAsyncRetry(t *testing.T) {
	var attempts atomic.Int32
	var mu sync.Mutex
	var sent []string // each attempt's codec, metadata and payload
	addr := answerServer(t, func(f proto.Frame) []byte {
		mu.Lock()
		sent = append(sent, fmt.Sprintf("%v %q %q", f.Codec, f.Metadata, f.Payload))
		mu.Unlock()
		if attempts.Add(1) == 1 {
			return errorFrame(f, true, proto.CodeResourceExhausted)
		}
		return response(f, []byte("done"))
	})
	c := dial(t, addr, client.Options{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	ch := make(chan error, 1)
	var got []byte
	ctx := handler.WithMetadata(ctxFor(t, 10*time.Second), "tenant", "t1")
	c.CallRawAsync(ctx, "Store/Put", []byte("req"), nil, func(reply []byte, err error) {
		got = reply
		ch <- err
	})
	if err := <-ch; err != nil || string(got) != "done" || attempts.Load() != 2 {
		t.Fatalf("%q, %v after %d attempts; want the reply after 2", got, err, attempts.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 2 || sent[0] != sent[1] || !strings.Contains(sent[0], "tenant") || !strings.Contains(sent[0], `"req"`) {
		t.Errorf("attempts sent %q; want the same request, its metadata and payload, twice", sent)
	}
}

// countingConn counts the writes on a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// TestBatch: the calls a Batch starts go out in one write.
func TestBatch(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	var writes atomic.Int64
	c := dial(t, s.Addr().String(), client.Options{Dial: func(ctx context.Context, addr string) (net.Conn, error) {
		nc, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		return countingConn{nc, &writes}, err
	}})
	ctx := ctxFor(t, 10*time.Second)
	var wg sync.WaitGroup
	before := writes.Load()
	const n = 50
	wg.Add(n)
	c.Batch(func() {
		for range n {
			c.CallRawAsync(ctx, builtin.EchoPacket, []byte("x"), nil, func(_ []byte, err error) {
				if err != nil {
					t.Error(err)
				}
				wg.Done()
			})
		}
	})
	wg.Wait()
	if w := writes.Load() - before; w != 1 {
		t.Fatalf("%d calls in %d writes, want 1", n, w)
	}
}

// TestCallRawAsyncAllocs: an asynchronous raw call with a reply buffer, a
// context that never ends and Options.Timeout allocates nothing of the
// client's (the in-process server's are counted too).
func TestCallRawAsyncAllocs(t *testing.T) {
	noAllocsPerCall(t, "asynchronous raw call", func(c *client.Client, req, reply []byte, done func([]byte, error)) func() {
		return func() { c.CallRawAsync(context.Background(), builtin.EchoPacket, req, reply, done) }
	})
}

// noAllocsPerCall fails t if a call that start makes, on a client with
// Options.Timeout against an in-process server, allocates: start returns
// what starts one call of a 16-byte request with a reply buffer, whose end
// done is told of.
func noAllocsPerCall(t *testing.T, what string, start func(c *client.Client, req, reply []byte, done func([]byte, error)) func()) {
	t.Helper()
	if raceOn {
		t.Skip("the race detector's pools drop items")
	}
	s := server(t, "127.0.0.1:0")
	c := dial(t, s.Addr().String(), client.Options{Timeout: 5 * time.Second})
	ch := make(chan error, 1)
	begin := start(c, make([]byte, 16), make([]byte, 0, 64), func(_ []byte, err error) { ch <- err })
	call := func() {
		begin()
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	for range 100 {
		call()
	}
	if allocs := testing.AllocsPerRun(2000, call); allocs > 0 {
		t.Fatalf("%.2f allocations per %s, want 0", allocs, what)
	}
}

// TestAsyncSweepShared: the deadlines of many clients' asynchronous calls
// (Options.Timeout, contexts that never end) are kept by one goroutine for
// the process, not one a client: 20 clients' calls that the server holds
// wait with one sweep running, and each ends at its deadline.
func TestAsyncSweepShared(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	const clients = 20
	errs := make(chan error, clients)
	for range clients {
		c := dial(t, s.Addr().String(), client.Options{Timeout: 300 * time.Millisecond})
		c.CallRawAsync(context.Background(), "Block/Forever", nil, nil, func(_ []byte, err error) { errs <- err })
	}
	time.Sleep(50 * time.Millisecond) // every call is out, each watched
	if n := goroutinesIn("client.(*sweeper).run"); n != 1 {
		t.Errorf("%d sweep goroutines while %d clients' calls wait; want 1", n, clients)
	}
	for range clients {
		if err := <-errs; !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("held past Options.Timeout: %v", err)
		}
	}
}

// goroutinesIn counts the goroutines whose stacks hold fn.
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			count++
		}
	}
	return count
}

// TestAliveWatchShared: the keep-alive watch is one goroutine for every
// client of the process that looks as often, not one a client, and it ends
// with the last of them.
func TestAliveWatchShared(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	others := goroutinesIn("client.(*aliveWatch).run") // of clients of other periods
	var cs []*client.Client
	for range 20 {
		cs = append(cs, dial(t, s.Addr().String(), client.Options{KeepAlive: 7 * time.Second, KeepAliveTimeout: 9 * time.Second}))
	}
	if n := goroutinesIn("client.(*aliveWatch).run") - others; n != 1 {
		t.Errorf("%d keep-alive watches for 20 clients; want 1", n)
	}
	for _, c := range cs {
		c.Close()
	}
	waitFor(t, func() bool { return goroutinesIn("client.(*aliveWatch).run") == others })
}
