package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
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

// frameReader reads frames from a fake server's connection, keeping what a
// read brings beyond the frame for the next.
type frameReader struct {
	nc  net.Conn
	buf []byte
}

// next returns the next frame, which owns its bytes.
func (r *frameReader) next() (proto.Frame, error) {
	tmp := make([]byte, 4096)
	for {
		if f, n, err := proto.Decode(r.buf, nil); err != nil {
			return f, err
		} else if n > 0 {
			own := bytes.Clone(r.buf[:n])
			r.buf = r.buf[n:]
			f, _, err = proto.Decode(own, nil)
			return f, err
		}
		n, err := r.nc.Read(tmp)
		r.buf = append(r.buf, tmp[:n]...)
		if err != nil {
			return proto.Frame{}, err
		}
	}
}

// answerServer is a fake server that answers each Request with the bytes
// answer returns for it (none if nil) and each Ping with a Pong.
func answerServer(t testing.TB, answer func(f proto.Frame) []byte) string {
	return fakeServer(t, func(nc net.Conn) {
		r := &frameReader{nc: nc}
		for {
			f, err := r.next()
			if err != nil {
				return
			}
			var out []byte
			switch f.Kind {
			case proto.KindPing:
				out = proto.AppendPong(nil, f.Payload)
			case proto.KindRequest:
				out = answer(f)
			}
			if len(out) > 0 {
				if _, err := nc.Write(out); err != nil {
					return
				}
			}
		}
	})
}

func response(f proto.Frame, payload []byte) []byte {
	return proto.AppendFrame(nil, proto.Header{Kind: proto.KindResponse, Codec: f.Codec, ID: f.ID}, "", nil, payload)
}

func errorFrame(f proto.Frame, unprocessed bool, code proto.Code) []byte {
	var flags proto.Flags
	if unprocessed {
		flags = proto.FlagUnprocessed
	}
	return proto.AppendError(nil, f.ID, flags, code, fmt.Sprintf("attempt failed with %v", code))
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// fast reconnects and retries within milliseconds.
var fast = client.Options{MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}

// TestRetryRules: which errors a call is sent again after, how often, and
// what the caller sees; each case through CallRaw and through GoRaw. A fake
// server answers each attempt in turn and counts them.
func TestRetryRules(t *testing.T) {
	type answer struct {
		unprocessed bool
		code        proto.Code
	}
	var (
		exhausted   = answer{true, proto.CodeResourceExhausted}
		draining    = answer{true, proto.CodeUnavailable}
		notFound    = answer{true, proto.CodeNotFound}
		badArgument = answer{true, proto.CodeInvalidArgument}
		ranOutOf    = answer{false, proto.CodeResourceExhausted}
		lost        = answer{false, proto.CodeUnavailable}
	)
	idem := client.RouteSet("Store/Get")
	cases := []struct {
		name     string
		route    string
		opts     client.Options
		answers  []answer // the first attempts' errors; later attempts succeed
		attempts int
		code     proto.Code // of the error returned; OK for none
		unproc   bool       // the error returned is marked Unprocessed
	}{
		{name: "exhausted once", route: "Store/Put", answers: []answer{exhausted}, attempts: 2},
		{name: "draining twice", route: "Store/Put", answers: []answer{draining, draining}, attempts: 3},
		{name: "exhausted always", route: "Store/Put", answers: []answer{exhausted, exhausted, exhausted, exhausted},
			attempts: 3, code: proto.CodeResourceExhausted, unproc: true},
		{name: "MaxRetries 1", route: "Store/Put", opts: client.Options{MaxRetries: 1}, answers: []answer{exhausted, exhausted},
			attempts: 2, code: proto.CodeResourceExhausted, unproc: true},
		{name: "not found", route: "Store/Put", answers: []answer{notFound}, attempts: 1, code: proto.CodeNotFound, unproc: true},
		{name: "invalid argument", route: "Store/Put", answers: []answer{badArgument}, attempts: 1, code: proto.CodeInvalidArgument, unproc: true},
		{name: "exhausted after running", route: "Store/Put", answers: []answer{ranOutOf}, attempts: 1, code: proto.CodeResourceExhausted},
		{name: "unavailable after running", route: "Store/Put", answers: []answer{lost}, attempts: 1, code: proto.CodeUnavailable},
		{name: "idempotent, unavailable after running", route: "Store/Get", opts: client.Options{Idempotent: idem},
			answers: []answer{lost}, attempts: 2},
		{name: "idempotent, exhausted after running", route: "Store/Get", opts: client.Options{Idempotent: idem},
			answers: []answer{ranOutOf}, attempts: 1, code: proto.CodeResourceExhausted},
		// The last error is unprocessed, but the first attempt may have
		// run: the caller must not be told the call did not.
		{name: "idempotent, ran then refused", route: "Store/Get", opts: client.Options{Idempotent: idem},
			answers: []answer{lost, exhausted, exhausted}, attempts: 3, code: proto.CodeResourceExhausted},
	}
	for _, tc := range cases {
		for _, api := range []string{"CallRaw", "GoRaw"} {
			t.Run(tc.name+"/"+api, func(t *testing.T) {
				var attempts atomic.Int32
				addr := answerServer(t, func(f proto.Frame) []byte {
					n := int(attempts.Add(1))
					if string(f.Route) != tc.route || string(f.Payload) != "req" {
						t.Errorf("attempt %d: %s %q", n, f.Route, f.Payload)
					}
					if n <= len(tc.answers) {
						a := tc.answers[n-1]
						return errorFrame(f, a.unprocessed, a.code)
					}
					return response(f, []byte("done"))
				})
				opts := tc.opts
				opts.MinBackoff, opts.MaxBackoff = time.Millisecond, 5*time.Millisecond
				c := dial(t, addr, opts)
				var reply []byte
				var err error
				if api == "CallRaw" {
					reply, err = c.CallRaw(ctxFor(t, 10*time.Second), tc.route, []byte("req"), nil)
				} else {
					f := c.GoRaw(ctxFor(t, 10*time.Second), tc.route, []byte("req"))
					err = f.Wait()
					reply = f.Reply()
				}
				if n := int(attempts.Load()); n != tc.attempts {
					t.Errorf("%d attempts, want %d", n, tc.attempts)
				}
				if tc.code == proto.CodeOK {
					if err != nil || string(reply) != "done" {
						t.Fatalf("got %q, %v; want the reply", reply, err)
					}
					return
				}
				var e *handler.Error
				if !errors.As(err, &e) || e.Code != tc.code || e.Unprocessed != tc.unproc {
					t.Fatalf("got %#v; want code %v, unprocessed %v", err, tc.code, tc.unproc)
				}
			})
		}
	}
}

// TestMaxRetriesDisabled: with MaxRetries -1 no call is sent twice, through
// any of the calling functions, even after errors that would be retried.
func TestMaxRetriesDisabled(t *testing.T) {
	var attempts atomic.Int32
	addr := answerServer(t, func(f proto.Frame) []byte {
		attempts.Add(1)
		return errorFrame(f, true, proto.CodeResourceExhausted)
	})
	c := dial(t, addr, client.Options{MaxRetries: -1, Idempotent: func(string) bool { return true }})
	ctx := ctxFor(t, 10*time.Second)
	calls := map[string]func() error{
		"CallRaw": func() error { _, err := c.CallRaw(ctx, "Store/Put", nil, nil); return err },
		"Call":    func() error { return c.Call(ctx, "Store/Put", 1, nil) },
		"Go":      func() error { return c.Go(ctx, "Store/Put", 1, nil).Wait() },
		"GoRaw":   func() error { return c.GoRaw(ctx, "Store/Put", nil).Wait() },
	}
	for name, call := range calls {
		attempts.Store(0)
		if err := call(); !errors.Is(err, handler.ErrResourceExhausted) || !handler.IsUnprocessed(err) {
			t.Errorf("%s: %v", name, err)
		}
		if n := attempts.Load(); n != 1 {
			t.Errorf("%s: %d attempts with retries disabled", name, n)
		}
	}
	if n := client.Retries(c); n != 0 {
		t.Errorf("%d retries with retries disabled", n)
	}
}

// TestGoAwayRetries: a server goes away naming its last call id, refuses a
// later call, and closes with calls unanswered. Calls after the last id
// are sent again on the new connection and succeed; calls up to it, whose
// fate is unknown, are sent again only if their route is idempotent.
func TestGoAwayRetries(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{} // attempts by payload, on every connection
	conns := 0
	addr := fakeServer(t, func(nc net.Conn) {
		mu.Lock()
		conns++
		first := conns == 1
		mu.Unlock()
		r := &frameReader{nc: nc}
		if !first { // later connections answer everything
			for {
				f, err := r.next()
				if err != nil {
					return
				}
				if f.Kind == proto.KindRequest {
					mu.Lock()
					seen[string(f.Payload)]++
					mu.Unlock()
					nc.Write(response(f, f.Payload))
				}
			}
		}
		// The first connection takes four calls and answers none of them;
		// it goes away naming the later of "put" and "get" (sent before
		// the others), refuses "refused", and closes.
		byPayload := map[string]proto.Frame{}
		for len(byPayload) < 4 {
			f, err := r.next()
			if err != nil {
				t.Errorf("first connection: %v", err)
				return
			}
			if f.Kind != proto.KindRequest {
				continue
			}
			mu.Lock()
			seen[string(f.Payload)]++
			mu.Unlock()
			byPayload[string(f.Payload)] = f
		}
		last := max(byPayload["put"].ID, byPayload["get"].ID)
		out := proto.AppendGoAway(nil, last, proto.CodeUnavailable, "restarting")
		out = append(out, errorFrame(byPayload["refused"], true, proto.CodeUnavailable)...)
		nc.Write(out)
		time.Sleep(50 * time.Millisecond)
	})
	opts := fast
	opts.Idempotent = client.RouteSet("Store/Get")
	opts.WaitForReady = true
	c := dial(t, addr, opts)
	ctx := ctxFor(t, 10*time.Second)

	type result struct {
		reply []byte
		err   error
	}
	results := map[string]chan result{}
	call := func(route, payload string) {
		ch := make(chan result, 1)
		results[payload] = ch
		go func() {
			reply, err := c.CallRaw(ctx, route, []byte(payload), nil)
			ch <- result{reply, err}
		}()
	}
	sent := func(n int) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == n }
	}
	call("Store/Put", "put")
	call("Store/Get", "get")
	waitFor(t, sent(2))
	call("Store/Put", "refused")
	call("Store/Put", "cut")
	waitFor(t, sent(4))

	r := <-results["put"]
	var e *handler.Error
	if !errors.As(r.err, &e) || e.Code != proto.CodeUnavailable || e.Unprocessed {
		t.Errorf("non-idempotent call the server may have run: %#v; want unavailable, fate unknown", r.err)
	}
	for _, p := range []string{"get", "refused", "cut"} {
		if r := <-results[p]; r.err != nil || string(r.reply) != p {
			t.Errorf("call %q: %q, %v; want it answered on the new connection", p, r.reply, r.err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{"put": 1, "get": 2, "refused": 2, "cut": 2}
	for p, n := range want {
		if seen[p] != n {
			t.Errorf("call %q reached a server %d times, want %d", p, seen[p], n)
		}
	}
}

// TestCloseDuringRetry: a call whose first attempt may have run (an
// idempotent route's Unavailable) and whose client closes while it waits
// to be sent again fails with that attempt's error, not Unprocessed: not
// with ErrClosed, which says the call never ran.
func TestCloseDuringRetry(t *testing.T) {
	var attempts atomic.Int32
	addr := answerServer(t, func(f proto.Frame) []byte {
		attempts.Add(1)
		return errorFrame(f, false, proto.CodeUnavailable)
	})
	c, err := client.Dial(ctxFor(t, 5*time.Second), addr, client.Options{
		Idempotent: client.RouteSet("Store/Get"), MinBackoff: time.Minute, MaxBackoff: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.CallRaw(ctxFor(t, 20*time.Second), "Store/Get", []byte("req"), nil)
		done <- err
	}()
	for attempts.Load() == 0 {
		time.Sleep(time.Millisecond) // until the first attempt is answered and the retry waits
	}
	time.Sleep(20 * time.Millisecond)
	c.Close()
	err = <-done
	if err == client.ErrClosed || handler.IsUnprocessed(err) || handler.CodeOf(err) != proto.CodeUnavailable {
		t.Fatalf("call closed while waiting to be sent again: %v; want its attempt's Unavailable, not Unprocessed", err)
	}
}

// TestRetryAcrossRestart: a real server is shut down while 50 callers keep
// calls in flight, then started again on the same port. Every call ends
// with its reply: those the draining server refused, or that found no
// connection, are sent again once it is back; and no call runs twice.
func TestRetryAcrossRestart(t *testing.T) {
	var mu sync.Mutex
	runs := map[string]int{}
	reg := handler.NewRegistry()
	reg.HandleFunc("Count/Run", func(_ context.Context, req, reply []byte) ([]byte, error) {
		mu.Lock()
		runs[string(req)]++
		mu.Unlock()
		time.Sleep(time.Millisecond)
		return append(reply, req...), nil
	}, handler.Blocking())
	start := func(addr string) *reactor.Server {
		s := reactor.New(reg, reactor.Options{})
		if err := s.Start(addr); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stop(t, s) })
		return s
	}
	s := start("127.0.0.1:0")
	addr := s.Addr().String()
	opts := fast
	opts.Conns = 2
	opts.WaitForReady = true
	// A call refused by the draining server can be refused again on the
	// other connection, or on one the server took in as it closed its
	// listener: each refusal costs a retry. Leave room for a few.
	opts.MaxRetries = 5
	c := dial(t, addr, opts)

	type result struct {
		id    string
		reply []byte
		err   error
	}
	var rmu sync.Mutex
	var results []result
	count := func() int { rmu.Lock(); defer rmu.Unlock(); return len(results) }
	quit := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-quit:
					return
				default:
				}
				id := fmt.Sprintf("%d/%d", g, i)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				reply, err := c.CallRaw(ctx, "Count/Run", []byte(id), nil)
				cancel()
				rmu.Lock()
				results = append(results, result{id, reply, err})
				rmu.Unlock()
			}
		}()
	}
	waitFor(t, func() bool { return count() >= 300 })
	stop(t, s)
	before := count()
	time.Sleep(100 * time.Millisecond) // down: calls wait for a connection
	start(addr)
	waitFor(t, func() bool { return count() >= before+300 })
	close(quit)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	for _, r := range results {
		if r.err != nil {
			t.Errorf("call %s: %v", r.id, r.err)
		} else if string(r.reply) != r.id {
			t.Errorf("call %s: reply %q", r.id, r.reply)
		}
		if n := runs[r.id]; n != 1 {
			t.Errorf("call %s ran %d times", r.id, n)
		}
	}
	t.Logf("%d calls, %d across the restart, %d retries", len(results), len(results)-before, client.Retries(c))
}

// TestWaitForReady: with no server, a WaitForReady call, asynchronous
// too, waits for one rather than failing, as long as its context lets it,
// and Close ends the wait.
func TestWaitForReady(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	addr := s.Addr().String()
	opts := fast
	opts.WaitForReady = true
	c := dial(t, addr, opts)
	other := dial(t, addr, opts)
	opts.MaxRetries = -1 // waiting is no retry
	noRetries := dial(t, addr, opts)
	for _, c := range []*client.Client{c, other, noRetries} { // taken in before the server stops
		if _, err := c.CallRaw(ctxFor(t, 5*time.Second), builtin.EchoPacket, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	stop(t, s)

	begin := time.Now()
	_, err := c.CallRaw(ctxFor(t, 150*time.Millisecond), builtin.EchoPacket, nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) || !handler.IsUnprocessed(err) {
		t.Fatalf("waiting call whose deadline passed: %v; want deadline exceeded, unprocessed", err)
	}
	if d := time.Since(begin); d < 100*time.Millisecond {
		t.Fatalf("waiting call returned after %v, before its deadline", d)
	}

	closed := make(chan error, 1)
	go func() { _, err := other.CallRaw(context.Background(), builtin.EchoPacket, nil, nil); closed <- err }()
	waited := make(chan error, 1)
	go func() {
		_, err := c.CallRaw(ctxFor(t, 20*time.Second), builtin.EchoPacket, []byte("x"), nil)
		waited <- err
	}()
	type answer struct {
		reply []byte
		err   error
	}
	answered := make(chan answer, 1) // an asynchronous call waits as well
	noRetries.CallRawAsync(ctxFor(t, 20*time.Second), builtin.EchoPacket, []byte("y"), nil, func(reply []byte, err error) {
		answered <- answer{append([]byte(nil), reply...), err}
	})
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-waited:
		t.Fatalf("call returned with the server down: %v", err)
	case a := <-answered:
		t.Fatalf("asynchronous call returned with the server down: %v", a.err)
	default:
	}
	other.Close()
	if err := <-closed; !errors.Is(err, client.ErrClosed) {
		t.Errorf("call waiting at Close: %v", err)
	}
	server(t, addr)
	if err := <-waited; err != nil {
		t.Fatalf("waiting call after the server came back: %v", err)
	}
	if a := <-answered; a.err != nil || string(a.reply) != "y" {
		t.Fatalf("waiting asynchronous call after the server came back: %q, %v", a.reply, a.err)
	}
}

// TestNotifyNeverRetried: a one-way call reaches the server once even when
// the server then goes away naming no call it will process, which has a
// call sent again; with no usable connection, a one-way call fails at once.
func TestNotifyNeverRetried(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{} // frames by payload, on every connection
	addr := fakeServer(t, func(nc net.Conn) {
		// Each connection takes one frame, then goes away without
		// processing anything, and closes.
		f, err := (&frameReader{nc: nc}).next()
		if err != nil {
			return
		}
		mu.Lock()
		seen[f.Kind.String()+" "+string(f.Payload)]++
		mu.Unlock()
		nc.Write(proto.AppendGoAway(nil, 0, proto.CodeUnavailable, "draining"))
	})
	count := func(key string) int { mu.Lock(); defer mu.Unlock(); return seen[key] }
	opts := client.Options{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, WaitForReady: true}
	c := dial(t, addr, opts)

	// The refusal has a call sent again, three times in all, each on a
	// new connection.
	_, err := c.CallRaw(ctxFor(t, 10*time.Second), "Note/Take", []byte("call"), nil)
	if !errors.Is(err, handler.ErrUnavailable) || !handler.IsUnprocessed(err) {
		t.Fatalf("call refused every time: %v", err)
	}
	if n := count("Request call"); n != 3 {
		t.Fatalf("call sent %d times, want 3", n)
	}
	// The same refusal of a one-way call: it is not sent again.
	if err := c.NotifyRaw(ctxFor(t, 10*time.Second), "Note/Take", []byte("note")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return count("OneWay note") == 1 })
	time.Sleep(50 * time.Millisecond) // time for any late resend
	if n := count("OneWay note"); n != 1 {
		t.Fatalf("one-way call sent %d times", n)
	}

	// A client whose only connection is gone, and whose redial would wait
	// an hour: a one-way call does not wait for it.
	var dials atomic.Int32
	lone := dial(t, addr, client.Options{MinBackoff: time.Hour, MaxBackoff: time.Hour,
		Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			if dials.Add(1) > 1 {
				return nil, errors.New("no more connections")
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}})
	lone.NotifyRaw(ctxFor(t, 10*time.Second), "Note/Take", []byte("first")) // the connection's one frame
	waitFor(t, func() bool {
		return lone.NotifyRaw(ctxFor(t, 10*time.Second), "Note/Take", []byte("later")) != nil
	})
	begin := time.Now()
	err = lone.NotifyRaw(ctxFor(t, 10*time.Second), "Note/Take", []byte("last"))
	if !errors.Is(err, handler.ErrUnavailable) || time.Since(begin) > time.Second {
		t.Fatalf("one-way call with no connection: %v after %v", err, time.Since(begin))
	}
	if n := client.Retries(lone); n != 0 {
		t.Fatalf("%d retries of one-way calls", n)
	}
}

// answerPings reads a fake server's connection until it ends, answering
// each Ping with a Pong after calling seen.
func answerPings(nc net.Conn, seen func()) {
	r := &frameReader{nc: nc}
	for {
		f, err := r.next()
		if err != nil {
			return
		}
		if f.Kind == proto.KindPing {
			seen()
			nc.Write(proto.AppendPong(nil, f.Payload))
		}
	}
}

// TestKeepAlivePing: an idle connection is pinged every KeepAlive, and
// stays up while the pings are answered; with KeepAlive negative, none is
// sent.
func TestKeepAlivePing(t *testing.T) {
	for _, tc := range []struct {
		name      string
		keepAlive time.Duration
	}{{"on", 30 * time.Millisecond}, {"off", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			var pings, conns atomic.Int32
			addr := fakeServer(t, func(nc net.Conn) {
				conns.Add(1)
				answerPings(nc, func() { pings.Add(1) })
			})
			// The timeout leaves room for a loaded -race run; 20 pings take
			// twice as long, so an answer not counted would fail the
			// connection before they are all sent.
			dial(t, addr, client.Options{KeepAlive: tc.keepAlive, KeepAliveTimeout: 300 * time.Millisecond})
			if tc.keepAlive > 0 {
				waitFor(t, func() bool { return pings.Load() >= 20 })
				if n := conns.Load(); n != 1 {
					t.Fatalf("%d connections: an answered ping failed one", n)
				}
				return
			}
			time.Sleep(300 * time.Millisecond)
			if n := pings.Load(); n != 0 {
				t.Fatalf("%d pings with keep-alive off", n)
			}
		})
	}
}

// TestKeepAliveWaitsForSilence: frames arriving more often than KeepAlive
// keep the Ping back, however long they go on; once they stop, the Ping
// comes KeepAlive to 5/4 KeepAlive later (the watch looks every quarter),
// never sooner.
func TestKeepAliveWaitsForSilence(t *testing.T) {
	// Long enough that a stall of the fake server under a loaded -race
	// run does not pass for silence (its frames come every/4 apart).
	const every = 400 * time.Millisecond
	type ping struct{ after time.Duration } // since the server's last frame
	pings := make(chan ping, 8)
	addr := fakeServer(t, func(nc net.Conn) {
		// Frames for three KeepAlives, one a quarter of it apart: Pongs,
		// which the client takes in and drops.
		var last time.Time
		for range 12 {
			if _, err := nc.Write(proto.AppendPong(nil, nil)); err != nil {
				return
			}
			last = time.Now()
			time.Sleep(every / 4)
		}
		answerPings(nc, func() { pings <- ping{time.Since(last)} })
	})
	dial(t, addr, client.Options{KeepAlive: every, KeepAliveTimeout: 5 * time.Second})
	select {
	case p := <-pings:
		// The server reads nothing while it sends, so a Ping sent then
		// is counted here after the last frame: too soon.
		if p.after < every || p.after > every*5/4+time.Second {
			t.Fatalf("first Ping %v after the last frame; want %v to %v (and slack)", p.after, every, every*5/4)
		}
		t.Logf("first Ping %v after the last frame", p.after)
	case <-time.After(10 * time.Second):
		t.Fatal("no Ping after the server went silent")
	}
}

// TestKeepAliveUnanswered: a server that reads but never answers is found
// within 5/4 KeepAlive + KeepAliveTimeout of the last frame from it: the pending
// call fails with Unavailable (its fate unknown, so it is not sent again)
// and the client redials.
func TestKeepAliveUnanswered(t *testing.T) {
	var conns atomic.Int32
	addr := fakeServer(t, func(nc net.Conn) {
		conns.Add(1)
		r := &frameReader{nc: nc}
		for {
			if _, err := r.next(); err != nil {
				return
			}
		}
	})
	opts := fast
	opts.KeepAlive, opts.KeepAliveTimeout = 50*time.Millisecond, 100*time.Millisecond
	c := dial(t, addr, opts)
	begin := time.Now()
	_, err := c.CallRaw(ctxFor(t, 10*time.Second), "Any/Route", nil, nil)
	d := time.Since(begin)
	var e *handler.Error
	if !errors.As(err, &e) || e.Code != proto.CodeUnavailable || e.Unprocessed {
		t.Fatalf("call to a silent server: %#v; want unavailable, fate unknown", err)
	}
	if d < opts.KeepAliveTimeout || d > opts.KeepAlive*5/4+opts.KeepAliveTimeout+time.Second {
		t.Fatalf("silent server found after %v; want about %v", d, opts.KeepAlive*5/4+opts.KeepAliveTimeout)
	}
	t.Logf("silent server found after %v: %v", d, err)
	waitFor(t, func() bool { return conns.Load() >= 2 })
}

// proxy forwards TCP connections to a target. Paused, it holds the bytes
// it reads, both ways, and closes nothing, as a network that loses every
// packet would; resumed, it forwards them.
type proxy struct {
	target string
	ln     net.Listener
	quit   chan struct{}
	wg     sync.WaitGroup

	mu    sync.Mutex
	open  chan struct{} // closed while forwarding
	conns []net.Conn
	count int
}

func newProxy(t testing.TB, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{target: target, ln: ln, quit: make(chan struct{}), open: make(chan struct{})}
	close(p.open)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		close(p.quit)
		ln.Close()
		p.mu.Lock()
		for _, nc := range p.conns {
			nc.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) pause() { p.mu.Lock(); p.open = make(chan struct{}); p.mu.Unlock() }

func (p *proxy) resume() { p.mu.Lock(); close(p.open); p.mu.Unlock() }

func (p *proxy) accepted() int { p.mu.Lock(); defer p.mu.Unlock(); return p.count }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.count++
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// pipe copies src to dst, holding each piece while the proxy is paused;
// when either side ends, it closes both.
func (p *proxy) pipe(src, dst net.Conn) {
	defer p.wg.Done()
	defer src.Close()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			open := p.open
			p.mu.Unlock()
			select {
			case <-open:
			case <-p.quit:
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestKeepAliveBlackhole: a connection whose packets vanish, with no FIN or
// RST, is found by keep-alive; the call on it fails with Unavailable, and
// the client is back once the network is.
func TestKeepAliveBlackhole(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	p := newProxy(t, s.Addr().String())
	opts := fast
	opts.KeepAlive, opts.KeepAliveTimeout = 100*time.Millisecond, 200*time.Millisecond
	c := dial(t, p.addr(), opts)
	if _, err := c.CallRaw(ctxFor(t, 5*time.Second), builtin.EchoPacket, []byte("before"), nil); err != nil {
		t.Fatal(err)
	}

	p.pause()
	begin := time.Now()
	_, err := c.CallRaw(ctxFor(t, 10*time.Second), builtin.EchoPacket, []byte("lost"), nil)
	d := time.Since(begin)
	var e *handler.Error
	if !errors.As(err, &e) || e.Code != proto.CodeUnavailable || e.Unprocessed {
		t.Fatalf("call into the black hole: %#v; want unavailable, fate unknown", err)
	}
	if limit := opts.KeepAlive*5/4 + opts.KeepAliveTimeout; d < opts.KeepAliveTimeout || d > limit+time.Second {
		t.Fatalf("black hole found after %v; want about %v", d, limit)
	}
	t.Logf("black hole found after %v: %v", d, err)

	p.resume()
	waitFor(t, func() bool {
		reply, err := c.CallRaw(ctxFor(t, time.Second), builtin.EchoPacket, []byte("after"), nil)
		return err == nil && string(reply) == "after"
	})
}

// TestKeepAliveTraffic: with short keep-alive times, busy, idle and slow
// periods on a healthy connection never fail it.
func TestKeepAliveTraffic(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	p := newProxy(t, s.Addr().String())
	opts := fast
	opts.KeepAlive, opts.KeepAliveTimeout = 50*time.Millisecond, 200*time.Millisecond
	c := dial(t, p.addr(), opts)

	end := time.Now().Add(300 * time.Millisecond) // busy
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				if _, err := c.CallRaw(ctxFor(t, 5*time.Second), builtin.EchoPacket, []byte("x"), nil); err != nil {
					t.Errorf("busy: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	time.Sleep(300 * time.Millisecond) // idle: only pings
	// Slow: a call that waits far longer than the keep-alive times ends
	// at its own deadline, not with a lost connection.
	_, err := c.CallRaw(ctxFor(t, 400*time.Millisecond), "Block/Forever", nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow call: %v", err)
	}
	if _, err := c.CallRaw(ctxFor(t, 5*time.Second), builtin.EchoPacket, nil, nil); err != nil {
		t.Fatal(err)
	}
	if n := p.accepted(); n != 1 {
		t.Fatalf("%d connections: keep-alive failed a healthy one", n)
	}
}
