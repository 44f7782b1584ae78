package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
)

// TestAsyncCaller: records whose done functions start their next calls
// complete every call with its own reply and say when it was read; a call
// refused before it is sent completes on the caller's goroutine, before
// Call returns, with no Answered time; a call past Options.Timeout fails
// with DeadlineExceeded; and a second Call while one is in flight panics.
func TestAsyncCaller(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	c := dial(t, s.Addr().String(), client.Options{Timeout: 300 * time.Millisecond})

	const callers, each = 16, 200
	began := time.Now()
	var left sync.WaitGroup
	left.Add(callers)
	for i := range callers {
		req := []byte{byte(i), 'x'}
		reply := make([]byte, 0, 8)
		var a *client.AsyncCaller
		k := 0
		a = c.NewAsyncCaller(func(got []byte, err error) {
			at := a.Answered()
			if err != nil || string(got) != string(req) || at.Before(began) || at.After(time.Now()) {
				t.Errorf("caller %d, call %d: %q, %v, answered %v after the start", i, k, got, err, at.Sub(began))
				left.Done()
				return
			}
			if k++; k == each {
				left.Done()
				return
			}
			a.Call(proto.CodecRaw, builtin.EchoPacket, req, reply[:0])
		})
		a.Call(proto.CodecRaw, builtin.EchoPacket, req, reply[:0])
	}
	left.Wait()

	type outcome struct {
		err      error
		answered time.Time
	}
	got := make(chan outcome, 1)
	var a *client.AsyncCaller
	a = c.NewAsyncCaller(func(_ []byte, err error) { got <- outcome{err, a.Answered()} })
	a.Call(proto.CodecRaw, "No Such Route", nil, nil)
	select {
	case o := <-got:
		if handler.CodeOf(o.err) != proto.CodeInvalidArgument || !handler.IsUnprocessed(o.err) || !o.answered.IsZero() {
			t.Errorf("a bad route: %v, answered %v; want InvalidArgument, unprocessed, no time", o.err, o.answered)
		}
	default:
		t.Fatal("a bad route's call did not complete before Call returned")
	}

	start := time.Now()
	a.Call(proto.CodecRaw, "Block/Forever", nil, nil)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a second Call while one was in flight did not panic")
			}
		}()
		a.Call(proto.CodecRaw, builtin.EchoPacket, nil, nil)
	}()
	o := <-got
	// The server's Error frame or the client's sweep ends it, whichever
	// comes first: Answered is the frame's time or none.
	if !errors.Is(o.err, context.DeadlineExceeded) || time.Since(start) < 250*time.Millisecond {
		t.Errorf("a call held past Options.Timeout: %v after %v; want DeadlineExceeded at 300ms", o.err, time.Since(start))
	}
}

// TestAsyncCallerChecksEveryCall: a record checks its route once, but a
// later call of the same route with a payload too large for a frame, or of
// a bad route, is still refused before it is sent, Unprocessed, and the
// record's next good call is answered.
func TestAsyncCallerChecksEveryCall(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	lim := proto.Limits{MaxFrameSize: 4096}.WithDefaults()
	c := dial(t, s.Addr().String(), client.Options{Limits: lim})
	got := make(chan error, 1)
	a := c.NewAsyncCaller(func(_ []byte, err error) { got <- err })
	checksEveryCall(t, lim, got, false, func(_ int, route string, payload []byte) {
		a.Call(proto.CodecRaw, route, payload, nil)
	})
}

// checksEveryCall makes, through call, a good call of a route, one of it
// too large for lim's frames, one of a bad route and a good one again, and
// fails t unless the good ones are answered (on got) and the others
// refused unsent, with the code that says why; before call returns, if
// refusedAtOnce.
func checksEveryCall(t *testing.T, lim proto.Limits, got <-chan error, refusedAtOnce bool, call func(i int, route string, payload []byte)) {
	t.Helper()
	for i, tc := range []struct {
		route   string
		payload []byte
		code    proto.Code // 0: answered
	}{
		{builtin.EchoPacket, []byte("small"), 0},
		{builtin.EchoPacket, make([]byte, lim.MaxFrameSize), proto.CodeResourceExhausted},
		{"No Such Route", nil, proto.CodeInvalidArgument},
		{builtin.EchoPacket, []byte("small again"), 0},
	} {
		call(i, tc.route, tc.payload)
		var err error
		select {
		case err = <-got:
		default:
			if tc.code != 0 && refusedAtOnce {
				t.Fatalf("call %d: refused, but not before the call returned", i)
			}
			select {
			case err = <-got:
			case <-time.After(5 * time.Second):
				t.Fatalf("call %d: no answer", i)
			}
		}
		var e *handler.Error
		switch {
		case tc.code == 0 && err != nil:
			t.Fatalf("call %d: %v", i, err)
		case tc.code != 0 && (!errors.As(err, &e) || e.Code != tc.code || !e.Unprocessed):
			t.Fatalf("call %d: %v, want %v, unprocessed", i, err, tc.code)
		}
	}
}

// TestAsyncCallerAllocs: a record's raw call with a reply buffer, under
// Options.Timeout, allocates nothing of the client's (the in-process
// server's are counted too).
func TestAsyncCallerAllocs(t *testing.T) {
	noAllocsPerCall(t, "call of an AsyncCaller", func(c *client.Client, req, reply []byte, done func([]byte, error)) func() {
		a := c.NewAsyncCaller(done)
		return func() { a.Call(proto.CodecRaw, builtin.EchoPacket, req, reply[:0]) }
	})
}

// TestAsyncCallerInterceptors: with interceptors, a record's call goes
// through them (on a goroutine of its own) and completes as any other.
func TestAsyncCallerInterceptors(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	var seen []string
	var mu sync.Mutex
	icpt := func(ctx context.Context, info *client.CallInfo, req, reply []byte, next client.Invoker) ([]byte, error) {
		mu.Lock()
		seen = append(seen, info.Route)
		mu.Unlock()
		return next(ctx, req, reply)
	}
	c := dial(t, s.Addr().String(), client.Options{Interceptors: []client.Interceptor{icpt}})
	got := make(chan string, 1)
	a := c.NewAsyncCaller(func(reply []byte, err error) {
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(reply)
	})
	for _, want := range []string{"one", "two"} {
		a.Call(proto.CodecRaw, builtin.EchoPacket, []byte(want), nil)
		if g := <-got; g != want {
			t.Fatalf("through an interceptor: %q, want %q", g, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] != builtin.EchoPacket {
		t.Errorf("the interceptor saw %v, want two calls of %s", seen, builtin.EchoPacket)
	}
}

// TestAsyncCallerCallWhileDoneRuns: a call started on another goroutine
// while the record's done function still runs (its call is over) is taken,
// not refused, and completes with its own reply once done lets the reader
// go on; a call started while that one is in flight still panics.
func TestAsyncCallerCallWhileDoneRuns(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	c := dial(t, s.Addr().String(), client.Options{Timeout: 5 * time.Second})
	inDone, goOn := make(chan struct{}), make(chan struct{})
	got := make(chan string, 2)
	first := true
	a := c.NewAsyncCaller(func(reply []byte, err error) {
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		got <- string(reply)
		if first {
			first = false
			close(inDone)
			<-goOn
		}
	})
	a.Call(proto.CodecRaw, builtin.EchoPacket, []byte("one"), nil)
	<-inDone
	a.Call(proto.CodecRaw, builtin.EchoPacket, []byte("two"), nil) // done still runs: must not panic
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a Call while the second call was in flight did not panic")
			}
		}()
		a.Call(proto.CodecRaw, builtin.EchoPacket, []byte("three"), nil)
	}()
	close(goOn)
	for _, want := range []string{"one", "two"} {
		select {
		case r := <-got:
			if r != want {
				t.Fatalf("got %q, want %q", r, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no answer for %q", want)
		}
	}
}
