package reactor_test

import (
	"context"
	"errors"
	"fmt"
	"io"
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

// The maximum connection age (Options.MaxConnAge, MaxConnAgeGrace): a
// connection past its age gets a GoAway and is served as on a drain; past
// its grace it is closed; and a client behind an L4 balancer spreads its
// calls over the servers behind it, without a failed call.

// held is a Blocking route whose calls wait until released (one call a
// token) or their context ends, which they report.
type held struct {
	started chan struct{}
	release chan struct{}
	ended   chan error
}

func newHeld(reg *handler.Registry, route string) *held {
	h := &held{started: make(chan struct{}, 16), release: make(chan struct{}, 16), ended: make(chan error, 16)}
	reg.HandleFunc(route, func(ctx context.Context, req, reply []byte) ([]byte, error) {
		h.started <- struct{}{}
		select {
		case <-h.release:
			h.ended <- nil
			return append(reply, req...), nil
		case <-ctx.Done():
			h.ended <- ctx.Err()
			return reply, ctx.Err()
		case <-time.After(20 * time.Second):
			h.ended <- errors.New("neither released nor cancelled")
			return reply, nil
		}
	}, handler.Blocking())
	return h
}

// TestMaxConnAge: past its age, a connection gets a GoAway naming the last
// call it took in (Unavailable, "past its maximum age"), not before half
// its age; its calls in flight are answered, a later call is refused
// (Unavailable, Unprocessed), and at the end of its grace it is closed
// with a GoAway saying so, the call it still runs cancelled.
func TestMaxConnAge(t *testing.T) {
	reg := builtinRegistry()
	h := newHeld(reg, "Age/Hold")
	const age = 300 * time.Millisecond
	s := start(t, reg, reactor.Options{MaxConnAge: age, MaxConnAgeGrace: 1500 * time.Millisecond, KeepAlive: -1})
	baseline(t)

	r := dialRaw(t, s)
	begin := time.Now()
	for id := uint32(1); id <= 2; id++ {
		r.send(proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: id}, "Age/Hold", nil, []byte{byte(id)}))
		<-h.started
	}
	f, err := r.nextWithin(5 * time.Second)
	if err != nil || f.Kind != proto.KindGoAway {
		t.Fatalf("got %v, %v; want the age's GoAway", f.Kind, err)
	}
	if d := time.Since(begin); d < age/2 {
		t.Fatalf("GoAway %v after the connection opened, before half its age (%v)", d, age)
	}
	last, code, msg := f.GoAwayBody()
	if last != 2 || code != proto.CodeUnavailable || !strings.Contains(string(msg), "maximum age") {
		t.Fatalf("GoAway last %d, %v %q; want last 2, Unavailable, past its maximum age", last, code, msg)
	}

	// A call after the GoAway is refused, and can go elsewhere.
	r.send(proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 3}, builtin.EchoPacket, nil, []byte("late")))
	f, err = r.next()
	if err != nil || f.Kind != proto.KindError || f.ID != 3 || f.Flags&proto.FlagUnprocessed == 0 {
		t.Fatalf("the call after the GoAway: %v id %d flags %v, %v; want an Unprocessed Error for call 3", f.Kind, f.ID, f.Flags, err)
	}
	if code, msg := f.ErrorBody(); code != proto.CodeUnavailable || !strings.Contains(string(msg), "maximum age") {
		t.Fatalf("the call after the GoAway: %v %q", code, msg)
	}

	// A call in flight is answered.
	h.release <- struct{}{}
	f, err = r.next()
	if err != nil || f.Kind != proto.KindResponse || (f.ID != 1 && f.ID != 2) || len(f.Payload) != 1 || uint32(f.Payload[0]) != f.ID {
		t.Fatalf("the call released after the GoAway: %v id %d %q, %v; want its Response", f.Kind, f.ID, f.Payload, err)
	}
	if err := <-h.ended; err != nil {
		t.Fatalf("the released call ended with %v", err)
	}

	// The grace ends the connection, and the call it still runs.
	if code, msg := expectGoAway(t, r, 5*time.Second); code != proto.CodeUnavailable || !strings.Contains(msg, "grace") {
		t.Fatalf("the end of the grace: GoAway %v %q", code, msg)
	}
	r.nc.Close() // the server lingers until the peer closes, and then cancels what runs
	select {
	case err := <-h.ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the call running at the end of the grace ended with %v, want its context cancelled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call running at the end of the grace was not cancelled")
	}
}

// TestMaxConnAgeOff: without MaxConnAge, a connection outlives many
// sweeps and gets no GoAway.
func TestMaxConnAgeOff(t *testing.T) {
	s := start(t, builtinRegistry(), reactor.Options{MaxConnAgeGrace: 10 * time.Millisecond, FrameTimeout: 40 * time.Millisecond, KeepAlive: -1})
	r := dialRaw(t, s)
	deadline := time.Now().Add(400 * time.Millisecond) // 40 sweeps
	for id := uint32(1); time.Now().Before(deadline); id++ {
		r.send(proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: id}, builtin.EchoPacket, nil, []byte("x")))
		if f, err := r.next(); err != nil || f.Kind != proto.KindResponse || f.ID != id {
			t.Fatalf("call %d: %v id %d, %v; want its Response", id, f.Kind, f.ID, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMaxConnAgeSpreadsCalls is issue 36's test of connection age: two
// servers behind one address (an L4 balancer that hands each new
// connection to the next server in turn), and a client whose calls, over
// two ages of its connections, reach both servers, none failed. Each
// GoAway makes the client dial again, and the balancer sends the new
// connection to the other server; calls that race the GoAway are refused
// unprocessed and sent again, and those made while the new connection is
// dialled wait for it.
func TestMaxConnAgeSpreadsCalls(t *testing.T) {
	if overTLS || overWS {
		t.Skip("the balancer and the client speak plain TCP")
	}
	const age = 300 * time.Millisecond
	var backends []string
	for _, name := range []string{"a", "b"} {
		reg := handler.NewRegistry()
		reg.HandleFunc("Who/Serves", func(_ context.Context, _, reply []byte) ([]byte, error) {
			return append(reply, name...), nil
		})
		s := start(t, reg, reactor.Options{MaxConnAge: age})
		backends = append(backends, s.Addr().String())
	}
	for _, conns := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d connections", conns), func(t *testing.T) {
			lb := newBalancer(t, backends)
			c, err := client.Dial(ctxT(t), lb.addr(), client.Options{Conns: conns})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			calls, failed, served, firstErr := callUntil(c, 4, func() bool { return lb.handed() >= 3*conns })
			t.Logf("%d calls: %d by a, %d by b, %d failed; %d connections through the balancer", calls, served["a"], served["b"], failed, lb.handed())
			if n := lb.handed(); n < 3*conns {
				t.Fatalf("the balancer handed out %d connections in 20s; want %d: the client's %d, and as many again at each of two ages", n, 3*conns, conns)
			}
			if failed != 0 {
				t.Errorf("%d calls failed, the first with %v", failed, firstErr)
			}
			if served["a"] == 0 || served["b"] == 0 || served["a"]+served["b"] != calls {
				t.Errorf("calls by server: %v of %d; want both, and no other answer", served, calls)
			}
		})
	}
}

// callUntil has callers goroutines call Who/Serves on c until done reports
// true, for at most 20s, and returns the calls made, those that failed, the
// replies counted by server name, and the first failure.
func callUntil(c *client.Client, callers int, done func() bool) (calls, failed int64, served map[string]int64, first error) {
	var mu sync.Mutex
	served = map[string]int64{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var reply []byte
			for {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				reply, err = c.CallRaw(context.Background(), "Who/Serves", nil, reply[:0])
				mu.Lock()
				calls++
				if err != nil {
					failed++
					if first == nil {
						first = err
					}
				} else {
					served[string(reply)]++
				}
				mu.Unlock()
			}
		}()
	}
	deadline := time.Now().Add(20 * time.Second)
	for !done() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	return calls, failed, served, first
}

// balancer is an L4 load balancer on loopback: it hands each connection it
// accepts to the next of its backends in turn, and copies bytes both ways
// until both sides have closed their end.
type balancer struct {
	ln       net.Listener
	backends []string
	n        atomic.Int64 // connections handed to a backend
	mu       sync.Mutex
	open     map[net.Conn]struct{}
	wg       sync.WaitGroup
}

func newBalancer(t *testing.T, backends []string) *balancer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &balancer{ln: ln, backends: backends, open: map[net.Conn]struct{}{}}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(func() {
		ln.Close()
		b.mu.Lock()
		for nc := range b.open {
			nc.Close()
		}
		b.mu.Unlock()
		b.wg.Wait()
	})
	return b
}

func (b *balancer) addr() string { return b.ln.Addr().String() }

// handed returns how many connections the balancer has handed to a
// backend.
func (b *balancer) handed() int { return int(b.n.Load()) }

func (b *balancer) accept() {
	defer b.wg.Done()
	for i := 0; ; i++ {
		down, err := b.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", b.backends[i%len(b.backends)], 5*time.Second)
		if err != nil {
			down.Close()
			continue
		}
		b.mu.Lock()
		b.open[down], b.open[up] = struct{}{}, struct{}{}
		b.mu.Unlock()
		b.n.Add(1)
		var ends atomic.Int32
		for _, p := range [][2]net.Conn{{up, down}, {down, up}} {
			b.wg.Add(1)
			go func(dst, src net.Conn) {
				defer b.wg.Done()
				_, _ = io.Copy(dst, src)
				_ = dst.(*net.TCPConn).CloseWrite()
				if ends.Add(1) == 2 { // both ways done
					b.mu.Lock()
					delete(b.open, up)
					delete(b.open, down)
					b.mu.Unlock()
					up.Close()
					down.Close()
				}
			}(p[0], p[1])
		}
	}
}
