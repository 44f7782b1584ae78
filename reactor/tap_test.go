package reactor_test

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// tapEvent is one call a fakeTap had.
type tapEvent struct {
	what  string // "open", "frame" or "close"
	out   bool
	frame proto.Frame // its sections copied
}

// fakeTap keeps every call, by connection; it takes a connection unless
// refuse is set.
type fakeTap struct {
	refuse bool
	mu     sync.Mutex
	conns  map[uint64][]tapEvent
	remote map[uint64]net.Addr
}

func newFakeTap(refuse bool) *fakeTap {
	return &fakeTap{refuse: refuse, conns: map[uint64][]tapEvent{}, remote: map[uint64]net.Addr{}}
}

func (f *fakeTap) TapOpen(conn uint64, remote net.Addr) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.conns[conn] = append(f.conns[conn], tapEvent{what: "open"})
	f.remote[conn] = remote
	return !f.refuse
}

func (f *fakeTap) TapFrame(conn uint64, out bool, frame []byte) {
	fr, n, err := proto.Decode(append([]byte(nil), frame...), nil)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil || n != len(frame) {
		fr = proto.Frame{Header: proto.Header{Kind: 0xff}} // not one whole frame: the test fails on it
	}
	f.conns[conn] = append(f.conns[conn], tapEvent{what: "frame", out: out, frame: fr})
}

func (f *fakeTap) TapClose(conn uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.conns[conn] = append(f.conns[conn], tapEvent{what: "close"})
}

// events returns a copy of what the tap had, by connection.
func (f *fakeTap) events() map[uint64][]tapEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := map[uint64][]tapEvent{}
	for c, evs := range f.conns {
		m[c] = append([]tapEvent(nil), evs...)
	}
	return m
}

// awaitClosed waits, a bounded time, until want connections have a close.
func (f *fakeTap) awaitClosed(t *testing.T, want int) map[uint64][]tapEvent {
	t.Helper()
	for range 1000 {
		evs := f.events()
		closed := 0
		for _, e := range evs {
			if len(e) > 0 && e[len(e)-1].what == "close" {
				closed++
			}
		}
		if closed >= want {
			return evs
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("fewer than %d connections closed on the tap: %v", want, summary(f.events()))
	return nil
}

func summary(m map[uint64][]tapEvent) string {
	s := ""
	for c, evs := range m {
		s += fmt.Sprintf("conn %d:", c)
		for _, e := range evs {
			if e.what == "frame" {
				s += fmt.Sprintf(" %v/%v#%d", map[bool]string{false: "in", true: "out"}[e.out], e.frame.Kind, e.frame.ID)
			} else {
				s += " " + e.what
			}
		}
		s += "; "
	}
	return s
}

// checkCalls checks one connection's events: open first, close last if
// closed, and each of calls Echo calls (payload "c<i>") a Request and then
// its Response with the same payload, in order.
func checkCalls(t *testing.T, conn uint64, evs []tapEvent, calls int, closed bool) {
	t.Helper()
	if len(evs) == 0 || evs[0].what != "open" {
		t.Fatalf("conn %d: first event is not open: %v", conn, summary(map[uint64][]tapEvent{conn: evs}))
	}
	if closed != (evs[len(evs)-1].what == "close") {
		t.Fatalf("conn %d: closed %v: %v", conn, closed, summary(map[uint64][]tapEvent{conn: evs}))
	}
	asked := map[uint32]string{}
	answered := 0
	next := 0 // the next call's number
	for i, e := range evs {
		if e.what == "open" && i > 0 || e.what == "close" && i != len(evs)-1 {
			t.Fatalf("conn %d: %s at %d: %v", conn, e.what, i, summary(map[uint64][]tapEvent{conn: evs}))
		}
		if e.what != "frame" {
			continue
		}
		f := e.frame
		switch {
		case f.Kind == 0xff:
			t.Fatalf("conn %d: the tap was given something that is not one whole frame", conn)
		case !e.out && f.Kind == proto.KindRequest:
			if want := fmt.Sprintf("c%d", next); string(f.Payload) != want || string(f.Route) != builtin.EchoPacket {
				t.Fatalf("conn %d: request %q to %s, want %q to %s", conn, f.Payload, f.Route, want, builtin.EchoPacket)
			}
			asked[f.ID] = string(f.Payload)
			next++
		case e.out && f.Kind == proto.KindResponse:
			want, ok := asked[f.ID]
			if !ok || string(f.Payload) != want {
				t.Fatalf("conn %d: response %d %q before its request (asked %q)", conn, f.ID, f.Payload, want)
			}
			delete(asked, f.ID)
			answered++
		}
	}
	if next != calls || answered != calls {
		t.Fatalf("conn %d: %d requests and %d responses seen, want %d", conn, next, answered, calls)
	}
}

// tapTransports are the transports a tap is fed on.
var tapTransports = []struct {
	name string
	opts reactor.Options
	ws   bool
}{
	{"loops", reactor.Options{Loops: 2}, false},
	{"std", reactor.Options{StdTransport: true}, false},
	{"websocket", reactor.Options{Loops: 2}, true},
}

// dialTap dials s on the transport.
func dialTap(t *testing.T, s *reactor.Server, overWebSocket bool) *client.Client {
	opts := client.Options{}
	if overWebSocket {
		opts.Dial = wsDial(t, s)
	}
	return dial(t, s, opts)
}

// TestTapSeesEveryCall: a tap set on a serving server sees, for each of
// several connections, its open, every Request and then its Response in
// order, and its close, on the event loops, the standard library
// transport and WebSocket.
func TestTapSeesEveryCall(t *testing.T) {
	if overTLS || overStd || overWS {
		t.Skip("runs each transport itself")
	}
	for _, tr := range tapTransports {
		t.Run(tr.name, func(t *testing.T) {
			s := start(t, builtinRegistry(), tr.opts)
			tap := newFakeTap(false)
			s.SetTap(tap)
			const conns, calls = 3, 20
			var wg sync.WaitGroup
			for range conns {
				c := dialTap(t, s, tr.ws)
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer c.Close()
					for i := range calls {
						want := fmt.Sprintf("c%d", i)
						if reply, err := c.CallRaw(ctxT(t), builtin.EchoPacket, []byte(want), nil); err != nil || string(reply) != want {
							t.Errorf("call %d: %q, %v", i, reply, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			evs := tap.awaitClosed(t, conns)
			if len(evs) != conns {
				t.Fatalf("the tap saw %d connections, want %d", len(evs), conns)
			}
			for conn, e := range evs {
				checkCalls(t, conn, e, calls, true)
				if tap.remote[conn] == nil {
					t.Fatalf("conn %d opened with no remote address", conn)
				}
			}
		})
	}
}

// TestTapSetWhileOpen: a connection open before the tap is set is offered
// to it before its next frame; SetTap(nil) closes it there, and a tap
// that replaces another sees the calls after it, the old one none.
func TestTapSetWhileOpen(t *testing.T) {
	if overTLS || overStd || overWS {
		t.Skip("runs each transport itself")
	}
	for _, tr := range tapTransports {
		t.Run(tr.name, func(t *testing.T) {
			s := start(t, builtinRegistry(), tr.opts)
			c := dialTap(t, s, tr.ws)
			call := func(i int) {
				t.Helper()
				want := fmt.Sprintf("c%d", i)
				if reply, err := c.CallRaw(ctxT(t), builtin.EchoPacket, []byte(want), nil); err != nil || string(reply) != want {
					t.Fatalf("call: %q, %v", reply, err)
				}
			}
			call(0) // before any tap
			first, second := newFakeTap(false), newFakeTap(false)
			s.SetTap(first)
			call(0)
			call(1)
			s.SetTap(second) // first is closed on the connection
			for conn, e := range first.awaitClosed(t, 1) {
				checkCalls(t, conn, e, 2, true)
			}
			call(0)
			s.SetTap(nil)
			evs := second.awaitClosed(t, 1)
			for conn, e := range evs {
				checkCalls(t, conn, e, 1, true)
			}
			call(1) // seen by no tap
			if n := len(first.events()) + len(second.events()); n != 2 {
				t.Fatalf("%d connections seen, want 1 by each tap", n)
			}
			for tap, calls := range map[*fakeTap]int{first: 2, second: 1} { // nothing after the close
				for conn, e := range tap.events() {
					checkCalls(t, conn, e, calls, true)
				}
			}
		})
	}
}

// TestTapRefused: a connection the tap does not take (TapOpen false)
// gives it nothing more, not even its close.
func TestTapRefused(t *testing.T) {
	s := start(t, builtinRegistry(), reactor.Options{})
	tap := newFakeTap(true)
	s.SetTap(tap)
	c := dialTap(t, s, false)
	for i := range 5 {
		if _, err := c.CallRaw(ctxT(t), builtin.EchoPacket, []byte("x"), nil); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	c.Close()
	for range 1000 { // until the server has forgotten the connection
		if s.Conns() == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.SetTap(nil)
	evs := tap.events()
	if len(evs) != 1 {
		t.Fatalf("%d connections offered, want 1", len(evs))
	}
	for conn, e := range evs {
		if len(e) != 1 || e[0].what != "open" {
			t.Fatalf("conn %d: %v, want its open alone", conn, summary(evs))
		}
	}
}
