package load

import (
	"context"
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
	"github.com/rpcd/rpcd/internal/loadgen"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// The driver's tests check what it counts and what it sends, never how
// fast: runs are bounded by a number of calls, or by a short time whose
// calls are only counted.

// TestScenarios runs every named scenario, a fixed number of calls each:
// it counts them all, answered and checked.
func TestScenarios(t *testing.T) {
	addr := serveBuiltin(t)
	for _, sc := range Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			r, err := Bench(ctx, Config{Addr: addr, Scenario: sc, Conns: 2, Inflight: 5, Calls: 300, Warmup: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if r.Calls != 300 || r.Errors != 0 {
				t.Errorf("%d calls, %d errors (%v, %v); want 300, none", r.Calls, r.Errors, r.ErrorsBy, r.FirstErrors)
			}
			if r.P50US <= 0 || r.BytesPerSec <= 0 {
				t.Errorf("p50 %v µs, %v bytes/s; want both above 0", r.P50US, r.BytesPerSec)
			}
		})
	}
}

// TestOpenLoop: an open loop makes about the calls asked for, none
// failed, and a soak on it passes.
func TestOpenLoop(t *testing.T) {
	addr := serveBuiltin(t)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	sc, _ := LookupScenario("EchoPacket16")
	r, err := Bench(ctx, Config{Addr: addr, Scenario: sc, Conns: 4, Inflight: 2, Rate: 2000, Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Calls == 0 || r.Errors != 0 {
		t.Errorf("%d calls, %d errors (%v); want some and none", r.Calls, r.Errors, r.FirstErrors)
	}
	if r.Calls > 2000*3/10*2 {
		t.Errorf("%d calls in 300 ms at 2,000 calls/s: the schedule was not kept", r.Calls)
	}

	rep, err := Soak(ctx, SoakConfig{Addr: addr, Conns: 20, Rate: 20, Duration: 600 * time.Millisecond, Every: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Calls == 0 || rep.Errors != 0 || len(rep.Windows) != 3 {
		t.Errorf("%d calls, %d errors, %d windows; want some, none, 3", rep.Calls, rep.Errors, len(rep.Windows))
	}
	if rep.Windows[0].Client.CPUPerCallUS <= 0 || rep.CPUPerCallUS <= 0 {
		t.Errorf("CPU per call %v in the first window, %v in all: want it measured", rep.Windows[0].Client.CPUPerCallUS, rep.CPUPerCallUS)
	}
}

// TestErrors: the server's errors, wrong replies and calls past their
// deadline are each counted by kind, with a client's error's message.
func TestErrors(t *testing.T) {
	reg := handler.NewRegistry()
	builtin.Register(reg)
	reg.HandleFunc("Test/Liar", func(_ context.Context, req, reply []byte) ([]byte, error) {
		return append(reply, "not what was sent"...), nil
	})
	hold := make(chan struct{})
	reg.HandleFunc("Test/Never", func(ctx context.Context, req, reply []byte) ([]byte, error) {
		<-hold // answers once the test ends, whatever the call's deadline
		return reply, nil
	}, handler.Blocking())
	srv := reactor.New(reg, reactor.Options{Loops: 1})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	defer close(hold) // before the shutdown, which waits for the handlers
	addr := srv.Addr().String()

	for _, tt := range []struct {
		sc      Scenario
		timeout time.Duration
		kind    string
		first   string
	}{
		{RawRoute("Test/Liar", Pattern(8), true), 0, "wrong reply", "rpcd: wrong reply: Test/Liar returned 17 bytes, want the 8 sent"},
		{RawRoute("No/Such", nil, false), 0, "not found", "rpcd: not found: no route No/Such"},
		{RawRoute("Test/Never", nil, false), 50 * time.Millisecond, "deadline exceeded", "rpcd: deadline exceeded: call Test/Never: deadline exceeded"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		r, err := Bench(ctx, Config{Addr: addr, Scenario: tt.sc, Conns: 1, Inflight: 2, Calls: 6, Timeout: tt.timeout})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if r.Calls != 6 || r.Errors != 6 || r.ErrorsBy[tt.kind] != 6 || r.FirstErrors[tt.kind] != tt.first {
			t.Errorf("%s: %d calls, %d errors %v, first %q; want 6 %s, first %q", tt.sc.Route, r.Calls, r.Errors, r.ErrorsBy, r.FirstErrors[tt.kind], tt.kind, tt.first)
		}
	}
}

// fakeServer speaks just enough of the protocol to answer requests with
// their payload, and does to each connection what its test asks: a Ping
// first, a GoAway after some requests, or a close.
type fakeServer struct {
	ln      net.Listener
	accepts atomic.Int32
	pongs   atomic.Int32
	serve   func(s *fakeServer, n int, fc *fakeConn) // how connection number n (from 1) goes
	wg      sync.WaitGroup
}

type fakeConn struct {
	nc  net.Conn
	lim proto.Limits
	buf []byte
}

// next returns the next frame from the client.
func (c *fakeConn) next() (proto.Frame, error) {
	for {
		f, n, err := proto.Decode(c.buf, &c.lim)
		if err != nil {
			return f, err
		}
		if n > 0 {
			f.Payload = append([]byte(nil), f.Payload...)
			c.buf = c.buf[n:]
			return f, nil
		}
		b := make([]byte, 4096)
		m, err := c.nc.Read(b)
		if err != nil {
			return f, err
		}
		c.buf = append(c.buf, b[:m]...)
	}
}

// echo answers count requests (forever if negative), calling replied, if
// not nil, after each reply written, and returns the last call id
// answered.
func (c *fakeConn) echo(count int, s *fakeServer, replied func()) uint32 {
	var last uint32
	for count != 0 {
		f, err := c.next()
		if err != nil {
			return last
		}
		switch f.Kind {
		case proto.KindPong:
			s.pongs.Add(1)
			continue
		case proto.KindRequest:
		default:
			continue
		}
		b, start := proto.BeginResponse(nil, f.ID, f.Codec)
		b = append(b, f.Payload...)
		proto.FinishFrame(b, start)
		if _, err := c.nc.Write(b); err != nil {
			return last
		}
		if replied != nil {
			replied()
		}
		last = f.ID
		count--
	}
	return last
}

func newFakeServer(t *testing.T, serve func(s *fakeServer, n int, fc *fakeConn)) *fakeServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{ln: ln, serve: serve}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			n := int(s.accepts.Add(1))
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer nc.Close()
				s.serve(s, n, &fakeConn{nc: nc, lim: proto.Limits{}.WithDefaults()})
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.wg.Wait()
	})
	return s
}

// TestConnection: the driver's clients answer a Ping with a Pong, move to
// a new connection after a GoAway once its calls are answered, and after
// a lost connection count its calls in flight as unavailable and redial.
func TestConnection(t *testing.T) {
	var drop atomic.Bool
	s := newFakeServer(t, func(s *fakeServer, n int, fc *fakeConn) {
		switch {
		case n == 1: // ping, answer some, go away
			_, _ = fc.nc.Write(proto.AppendPing(nil, []byte("p")))
			last := fc.echo(50, s, nil)
			_, _ = fc.nc.Write(proto.AppendGoAway(nil, last, proto.CodeOK, "draining"))
			fc.echo(-1, s, nil) // until the client leaves
		case drop.Load() && n == 2: // take a call, and lose the connection
			_, _ = fc.next()
		default:
			fc.echo(-1, s, nil)
		}
	})
	addr := s.ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	sc := RawRoute("Test/Echo", Pattern(16), true)
	opts := client.Options{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	r, err := Bench(ctx, Config{Addr: addr, Scenario: sc, Conns: 1, Inflight: 1, Calls: 200, Client: opts})
	if err != nil {
		t.Fatal(err)
	}
	if r.Calls != 200 || r.Errors != 0 || s.accepts.Load() != 2 || s.pongs.Load() != 1 {
		t.Errorf("%d calls, %d errors %v, %d connections, %d pongs; want 200, none, 2 (a successor after the GoAway), 1", r.Calls, r.Errors, r.FirstErrors, s.accepts.Load(), s.pongs.Load())
	}

	drop.Store(true)
	s.accepts.Store(1)
	r, err = Bench(ctx, Config{Addr: addr, Scenario: sc, Conns: 1, Inflight: 1, Calls: 100, Client: opts})
	if err != nil {
		t.Fatal(err)
	}
	if r.ErrorsBy["unavailable"] != 1 || r.Calls != 100 || !strings.HasPrefix(r.FirstErrors["unavailable"], "rpcd: unavailable: connection lost") {
		t.Errorf("%d calls, errors %v, first %v; want 100, 1 unavailable (connection lost)", r.Calls, r.ErrorsBy, r.FirstErrors)
	}
}

// TestMemoryPerConn bounds what the driver holds per connection: heap in
// use and goroutine stacks over 400 connections, their calls made, under
// 16 KiB each, the in-process server's share (about 2 KiB) included; a
// client per connection held about 90 before its read buffer shrank and
// its goroutines went.
func TestMemoryPerConn(t *testing.T) {
	if testing.Short() || raceOn {
		t.Skip("opens 400 connections; the race detector adds to their memory")
	}
	addr := serveBuiltin(t)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	sc, _ := LookupScenario("EchoPacket16")
	const conns = 400
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse + ms.StackInuse
	}
	rec := loadgen.NewRecorder(conns) // its histograms are the run's, not the connections'
	before := heap()
	d, err := dialAsync(ctx, driverConfig{addr: addr, sc: sc, conns: conns, inflight: 1, rate: 4000, timeout: time.Second, depth: DefaultPipeline})
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	d.start(rec, 0)
	time.Sleep(300 * time.Millisecond)
	d.stop()
	after := heap()
	if calls, errs := rec.Progress(); calls == 0 || errs != 0 {
		t.Fatalf("%d calls, %d errors; want some and none", calls, errs)
	}
	per := float64(after-before) / conns
	t.Logf("%.0f bytes of heap and stacks per connection", per)
	if per > 16<<10 {
		t.Errorf("%.0f bytes per connection, want under 16 KiB", per)
	}
}
