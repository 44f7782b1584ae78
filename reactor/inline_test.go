package reactor_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/reactor"
)

// TestInlineHandlerCallingOut: an inline handler that calls the same
// server through a client.Client, which waits for a reply only the
// handler's own event loop could read, is refused at once with an error
// that names the route and the remedy, by each of the client's calls that
// wait; and a client on another connection of the same loop is served
// meanwhile. (Before the refusal, the loop stalled until the caller's
// deadline, and every connection on it with it.)
func TestInlineHandlerCallingOut(t *testing.T) {
	reg := builtinRegistry()
	s := start(t, reg, reactor.Options{Loops: 1}) // every connection on the one loop
	self := dial(t, s, client.Options{})          // the handlers' client of their own server
	k, err := client.DialService(ctxT(t), "static://"+s.Addr().String()+"/self", client.ServiceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })

	type outcome struct {
		err  error
		took time.Duration
	}
	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Client.Call", func(ctx context.Context) error {
			var out string
			return self.Call(ctx, builtin.EchoString, "hi", &out)
		}},
		{"Client.CallRaw", func(ctx context.Context) error {
			_, err := self.CallRaw(ctx, builtin.EchoPacket, []byte("hi"), nil)
			return err
		}},
		{"Client.Go", func(ctx context.Context) error {
			var out string
			return self.Go(ctx, builtin.EchoString, "hi", &out).Wait()
		}},
		{"Client.GoRaw", func(ctx context.Context) error { return self.GoRaw(ctx, builtin.EchoPacket, []byte("hi")).Wait() }},
		{"Client.OpenStream", func(ctx context.Context) error {
			st, err := self.OpenStream(ctx, builtin.StreamSource)
			if err != nil {
				return err
			}
			defer st.Close()
			_, err = st.Write([]byte{0, 0, 0, 0, 0, 0, 0, 2}) // two bytes, please
			if err == nil {
				_, err = io.ReadFull(st, make([]byte, 2))
			}
			return err
		}},
		{"Client.Subscribe", func(ctx context.Context) error {
			sub, err := self.Subscribe(ctx, "inline.>", make(chan client.Message, 1))
			if err == nil {
				sub.Unsubscribe()
			}
			return err
		}},
		{"Cluster.Call", func(ctx context.Context) error {
			var out string
			return k.Call(ctx, builtin.EchoString, "hi", &out)
		}},
		{"Cluster.CallRaw", func(ctx context.Context) error {
			_, err := k.CallRaw(ctx, builtin.EchoPacket, []byte("hi"), nil)
			return err
		}},
		{"Cluster.GoRaw", func(ctx context.Context) error { return k.GoRaw(ctx, builtin.EchoPacket, []byte("hi")).Wait() }},
	}
	entered := make(chan struct{}, 1)
	got := make(chan outcome, 1)
	reg.HandleFunc("Inline/CallsOut", func(ctx context.Context, req, reply []byte) ([]byte, error) {
		entered <- struct{}{}
		began := time.Now()
		err := calls[req[0]].call(ctx) // req names the call to make
		got <- outcome{err, time.Since(began)}
		return reply, err
	})

	c := dial(t, s, client.Options{})
	other := dial(t, s, client.Options{}) // an unrelated client, on the same loop
	for i, tc := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		callerErr := make(chan error, 1)
		go func() {
			_, err := c.CallRaw(ctx, "Inline/CallsOut", []byte{byte(i)}, nil)
			callerErr <- err
		}()
		<-entered
		octx, ocancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		reply, oerr := other.CallRaw(octx, builtin.EchoPacket, []byte("unrelated"), nil)
		ocancel()
		o := <-got
		cerr := <-callerErr
		cancel()

		if oerr != nil || string(reply) != "unrelated" {
			t.Errorf("%s: the unrelated client on another connection: %q, %v", tc.name, reply, oerr)
		}
		var he *handler.Error
		if !errors.As(o.err, &he) || !errors.Is(o.err, handler.ErrFailedPrecondition) || !he.Unprocessed {
			t.Errorf("%s from an inline handler: %v (after %v); want FailedPrecondition, unprocessed", tc.name, o.err, o.took)
			continue
		}
		if o.took > 100*time.Millisecond {
			t.Errorf("%s: refused after %v; want at once", tc.name, o.took)
		}
		for _, want := range []string{"Inline/CallsOut", "handler.Blocking()"} {
			if !strings.Contains(he.Message, want) {
				t.Errorf("%s: the refusal %q does not name %q", tc.name, he.Message, want)
			}
		}
		if !errors.Is(cerr, handler.ErrFailedPrecondition) {
			t.Errorf("%s: the caller got %v; want the handler's FailedPrecondition", tc.name, cerr)
		}
	}

	// Notify only queues the message: it is allowed, and arrives.
	reg.HandleFunc("Inline/Notifies", func(ctx context.Context, _, reply []byte) ([]byte, error) {
		return reply, self.NotifyRaw(ctx, builtin.EchoPacket, []byte("one way"))
	})
	if _, err := c.CallRaw(ctxT(t), "Inline/Notifies", nil, nil); err != nil {
		t.Fatalf("Notify from an inline handler: %v", err)
	}
}

// TestWatchdog: an inline handler that holds its event loop past
// InlineThreshold, one that would never return on its own among them, is
// reported while it runs: counted on its route (Server.Routes, Sys/Routes),
// logged once for the route with the route, the connection and the stack
// of the handler; a second overrun is counted, not logged again. A
// handler that returns in time is never reported.
func TestWatchdog(t *testing.T) {
	reg := builtinRegistry()
	release := make(chan struct{})
	reg.HandleFunc("Inline/Stuck", func(context.Context, []byte, []byte) ([]byte, error) {
		<-release // until the test lets it go
		return nil, nil
	}, handler.Inline()) // so that it stays on the loop whatever it does
	var logs syncBuffer
	s := start(t, reg, reactor.Options{InlineThreshold: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	c := dial(t, s, client.Options{})
	ctx := ctxT(t)

	overruns := func(route string) uint64 {
		for _, r := range s.Routes() {
			if r.Name == route {
				return r.Overruns
			}
		}
		t.Fatalf("no route %s", route)
		return 0
	}
	for run := uint64(1); run <= 2; run++ {
		done := make(chan error, 1)
		go func() { _, err := c.CallRaw(ctx, "Inline/Stuck", nil, nil); done <- err }()
		for deadline := time.Now().Add(5 * time.Second); overruns("Inline/Stuck") < run; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("run %d: the watchdog has not reported the stuck handler within 5s; logs:\n%s", run, logs.String())
			}
		}
		release <- struct{}{}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for range 20 {
		if _, err := c.CallRaw(ctx, builtin.EchoPacket, []byte("quick"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := overruns("Inline/Stuck"); n != 2 {
		t.Errorf("Inline/Stuck: %d overruns, want 2", n)
	}
	if n := overruns(builtin.EchoPacket); n != 0 {
		t.Errorf("%s: %d overruns, want 0", builtin.EchoPacket, n)
	}
	var routes []handler.RouteInfo
	if err := c.Call(ctx, builtin.Routes, nil, &routes); err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		if r.Name == "Inline/Stuck" && (r.Overruns != 2 || !r.Inline || r.Blocking || r.Moved) {
			t.Errorf("Sys/Routes: %+v", r)
		}
	}
	log := logs.String()
	if n := strings.Count(log, "holds its event loop past the watchdog's threshold"); n != 1 {
		t.Fatalf("%d overrun logs, want 1:\n%s", n, log)
	}
	for _, want := range []string{"level=WARN", "route=Inline/Stuck", "threshold=50ms", "remote=127.0.0.1:", "TestWatchdog.func1", "handler/transport.serveInline"} {
		if !strings.Contains(log, want) {
			t.Errorf("the overrun log lacks %q:\n%s", want, log)
		}
	}
}

// TestInlineRouteMoves: a route whose inline runs keep passing their
// budget (here, every run overruns the watchdog's threshold) moves itself
// to the blocking pool: logged once, shown in Sys/Routes, and its next
// calls run on the pool, where it may call out. A route pinned with
// handler.Inline, as slow, stays on the loop.
func TestInlineRouteMoves(t *testing.T) {
	reg := builtinRegistry()
	slow := func(ctx context.Context, _, reply []byte) ([]byte, error) {
		time.Sleep(60 * time.Millisecond)
		if handler.CallFrom(ctx).Inline {
			return append(reply, "inline"...), nil
		}
		return append(reply, "pool"...), nil
	}
	reg.HandleFunc("Slow/Moves", slow)
	reg.HandleFunc("Slow/Pinned", slow, handler.Inline())
	var logs syncBuffer
	s := start(t, reg, reactor.Options{InlineThreshold: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	c := dial(t, s, client.Options{})
	ctx := ctxT(t)

	where := func(route string) string {
		reply, err := c.CallRaw(ctx, route, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", route, err)
		}
		return string(reply)
	}
	moved := 0
	for i := 1; i <= 20 && moved == 0; i++ {
		if where("Slow/Moves") == "pool" {
			moved = i
		}
	}
	// The 8th overrun moves it; the call after runs on the pool. An
	// overrun may be missed on a busy machine, hence the slack.
	if moved < 9 || moved > 12 {
		t.Fatalf("Slow/Moves ran on the pool first at call %d; want the 9th or soon after\n%s", moved, logs.String())
	}
	for range 12 {
		if w := where("Slow/Pinned"); w != "inline" {
			t.Fatalf("the pinned route ran on the %s", w)
		}
	}
	var routes []handler.RouteInfo
	if err := c.Call(ctx, builtin.Routes, nil, &routes); err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		switch r.Name {
		case "Slow/Moves":
			if !r.Blocking || !r.Moved || r.Inline || r.Overruns < 8 {
				t.Errorf("Sys/Routes: %+v", r)
			}
		case "Slow/Pinned":
			if r.Blocking || r.Moved || !r.Inline || r.Overruns < 8 {
				t.Errorf("Sys/Routes: %+v", r)
			}
		}
	}
	log := logs.String()
	if n := strings.Count(log, "route moved from the event loop to the blocking pool"); n != 1 || !strings.Contains(log, `route=Slow/Moves budget=1ms over="8 of its last 16 timed runs"`) {
		t.Fatalf("%d logs of a move:\n%s", n, log)
	}
	if strings.Contains(log, "moved from the event loop to the blocking pool\" route=Slow/Pinned") {
		t.Fatal("the pinned route moved")
	}
}
