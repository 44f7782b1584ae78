package client_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
)

// TestPipe: a pipe's calls started together (Run), and each tag's next
// started from its done function (Next), complete with their own replies
// and the time their batch was read, while calls started on other
// goroutines (Call) go on the same pipe at the same time.
func TestPipe(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	c := dial(t, s.Addr().String(), client.Options{Timeout: 5 * time.Second})

	const tags, each, others = 32, 100, 200
	began := time.Now()
	var left sync.WaitGroup
	left.Add(tags + others)
	reqs := make([][]byte, tags+others)
	replies := make([][]byte, tags+others)
	counts := make([]int, tags)
	for i := range reqs {
		reqs[i] = []byte{byte(i), byte(i >> 8), 'p'}
		replies[i] = make([]byte, 0, 8)
	}
	var p *client.Pipe
	p = c.NewPipe(tags+others, func(tag int, got []byte, err error) {
		at := p.Answered()
		if err != nil || !bytes.Equal(got, reqs[tag]) || at.Before(began) || at.After(time.Now()) {
			t.Errorf("tag %d: %q, %v, answered %v after the start", tag, got, err, at.Sub(began))
			left.Done()
			return
		}
		if tag >= tags { // a call from another goroutine
			left.Done()
			return
		}
		if counts[tag]++; counts[tag] == each {
			left.Done()
			return
		}
		p.Next(tag, proto.CodecRaw, builtin.EchoPacket, reqs[tag], replies[tag][:0])
	})
	p.Run(func() {
		for i := range tags {
			p.Next(i, proto.CodecRaw, builtin.EchoPacket, reqs[i], replies[i][:0])
		}
	})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := tags + g; i < tags+others; i += 4 {
				p.Call(i, proto.CodecRaw, builtin.EchoPacket, reqs[i], replies[i][:0])
			}
		}()
	}
	wg.Wait()
	waitGroup(t, &left, 20*time.Second)
	if n := client.Pending(c); n != 0 {
		t.Errorf("%d calls left in the connection's table; a pipe's calls are its own", n)
	}
}

// waitGroup waits for wg, failing t after d.
func waitGroup(t *testing.T, wg *sync.WaitGroup, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatal("calls did not complete")
	}
}

// TestPipeRefusals: a call refused before it is sent (a bad route, a
// payload too large for a frame) completes before Call returns, Unprocessed
// and with no Answered time, and the pipe's next call is answered; Next
// outside done or a Run, and more calls in flight than the pipe was made
// for, panic.
func TestPipeRefusals(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	lim := proto.Limits{MaxFrameSize: 4096}.WithDefaults()
	c := dial(t, s.Addr().String(), client.Options{Limits: lim})
	got := make(chan error, 1)
	var p *client.Pipe
	p = c.NewPipe(1, func(_ int, _ []byte, err error) {
		if !p.Answered().IsZero() && err != nil {
			err = errors.New("an Answered time for a call that was never sent")
		}
		got <- err
	})
	checksEveryCall(t, lim, got, true, func(i int, route string, payload []byte) {
		p.Call(i, proto.CodecRaw, route, payload, nil)
	})

	if !raceOn { // a misuse the race detector reports first
		mustPanic(t, "Next outside done or a Run", func() { p.Next(0, proto.CodecRaw, builtin.EchoPacket, nil, nil) })
	}
	p.Call(0, proto.CodecRaw, "Block/Forever", nil, nil)
	mustPanic(t, "a second call in a pipe of one", func() { p.Call(1, proto.CodecRaw, builtin.EchoPacket, nil, nil) })
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}

// TestPipeDeadline: a call past Options.Timeout fails with
// DeadlineExceeded, by the server's Error frame or the client's sweep,
// whichever is first, and the pipe's next call is answered.
func TestPipeDeadline(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	c := dial(t, s.Addr().String(), client.Options{Timeout: 300 * time.Millisecond})
	got := make(chan error, 1)
	p := c.NewPipe(2, func(_ int, _ []byte, err error) { got <- err })
	start := time.Now()
	p.Call(0, proto.CodecRaw, "Block/Forever", nil, nil)
	if err := <-got; !errors.Is(err, context.DeadlineExceeded) || time.Since(start) < 250*time.Millisecond {
		t.Errorf("a call held past Options.Timeout: %v after %v; want DeadlineExceeded at 300ms", err, time.Since(start))
	}
	p.Call(1, proto.CodecRaw, builtin.EchoPacket, []byte("x"), nil)
	if err := <-got; err != nil {
		t.Errorf("the next call: %v", err)
	}
}

// TestPipeSweep: the client's sweep ends a pipe's call past its deadline
// when the server sends nothing (a server that never answers), telling it
// with a Cancel.
func TestPipeSweep(t *testing.T) {
	cancels := make(chan uint32, 1)
	addr := fakeServer(t, func(nc net.Conn) {
		r := &frameReader{nc: nc}
		for {
			f, err := r.next()
			if err != nil {
				return
			}
			if f.Kind == proto.KindCancel {
				cancels <- f.ID
			}
		}
	})
	c := dial(t, addr, client.Options{Timeout: 200 * time.Millisecond})
	got := make(chan error, 1)
	p := c.NewPipe(1, func(_ int, _ []byte, err error) { got <- err })
	p.Call(0, proto.CodecRaw, builtin.EchoPacket, []byte("x"), nil)
	select {
	case err := <-got:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a call no one answers: %v, want DeadlineExceeded", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a call no one answers never ended")
	}
	select {
	case <-cancels:
	case <-time.After(5 * time.Second):
		t.Fatal("no Cancel for the call past its deadline")
	}
}

// TestPipeConnectionLost: of a pipe's calls in flight when the connection
// is lost, one the server's GoAway named may have run and fails
// Unavailable, not Unprocessed; one it excluded is sent again, as CallRaw's
// would be, and answered on the client's new connection, where the pipe's
// next calls go too.
func TestPipeConnectionLost(t *testing.T) {
	var mu sync.Mutex
	conns := 0
	addr := fakeServer(t, func(nc net.Conn) {
		mu.Lock()
		conns++
		first := conns == 1
		mu.Unlock()
		r := &frameReader{nc: nc}
		if !first {
			for {
				f, err := r.next()
				if err != nil {
					return
				}
				if f.Kind == proto.KindRequest {
					nc.Write(response(f, f.Payload))
				}
			}
		}
		// The first takes two calls, goes away naming the first, and
		// closes without answering either.
		var got []proto.Frame
		for len(got) < 2 {
			f, err := r.next()
			if err != nil {
				return
			}
			if f.Kind == proto.KindRequest {
				got = append(got, f)
			}
		}
		nc.Write(proto.AppendGoAway(nil, got[0].ID, proto.CodeUnavailable, "restarting"))
		time.Sleep(50 * time.Millisecond)
	})
	c := dial(t, addr, fast)
	type result struct {
		tag   int
		reply string
		err   error
	}
	results := make(chan result, 4)
	p := c.NewPipe(2, func(tag int, reply []byte, err error) { results <- result{tag, string(reply), err} })
	p.Run(func() {
		p.Next(0, proto.CodecRaw, builtin.EchoPacket, []byte("ran?"), nil)
		p.Next(1, proto.CodecRaw, builtin.EchoPacket, []byte("excluded"), nil)
	})
	for range 2 {
		var r result
		select {
		case r = <-results:
		case <-time.After(5 * time.Second):
			t.Fatal("calls on a lost connection never ended")
		}
		var e *handler.Error
		switch {
		case r.tag == 0 && (!errors.As(r.err, &e) || e.Code != proto.CodeUnavailable || e.Unprocessed):
			t.Errorf("the call the GoAway named: %q, %v; want Unavailable, fate unknown", r.reply, r.err)
		case r.tag == 1 && (r.err != nil || r.reply != "excluded"):
			t.Errorf("the call the GoAway excluded: %q, %v; want it sent again and answered", r.reply, r.err)
		}
	}
	mu.Lock()
	if conns != 2 {
		t.Errorf("%d connections, want 2", conns)
	}
	mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.Call(0, proto.CodecRaw, builtin.EchoPacket, []byte("again"), nil)
		r := <-results
		if r.err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no call answered on the new connection: %v", r.err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPipeLargeReplies: replies larger than the connection's read buffer,
// as they are and compressed, complete their pipe's calls whole, mixed
// with small ones.
func TestPipeLargeReplies(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	for _, zip := range []bool{false, true} {
		opts := client.Options{Timeout: 5 * time.Second}
		if zip {
			opts.Compression = proto.CompressionGzip
		}
		c := dial(t, s.Addr().String(), opts)
		big := bytes.Repeat([]byte("0123456789abcdef"), 20_000) // 320 KB, compressible
		reqs := [][]byte{big, []byte("small"), big[:70_000], []byte("s2")}
		var left sync.WaitGroup
		left.Add(len(reqs))
		p := c.NewPipe(len(reqs), func(tag int, got []byte, err error) {
			defer left.Done()
			if err != nil || !bytes.Equal(got, reqs[tag]) {
				t.Errorf("compressed %v, call %d: %d bytes, %v; want its %d", zip, tag, len(got), err, len(reqs[tag]))
			}
		})
		p.Run(func() {
			for i, r := range reqs {
				p.Next(i, proto.CodecRaw, builtin.EchoPacket, r, nil)
			}
		})
		waitGroup(t, &left, 10*time.Second)
	}
}

// TestPipeAllocs: a pipe's raw call with a reply buffer, under
// Options.Timeout, allocates nothing of the client's (the in-process
// server's are counted too).
func TestPipeAllocs(t *testing.T) {
	noAllocsPerCall(t, "call of a Pipe", func(c *client.Client, req, reply []byte, done func([]byte, error)) func() {
		p := c.NewPipe(1, func(_ int, reply []byte, err error) { done(reply, err) })
		return func() { p.Call(0, proto.CodecRaw, builtin.EchoPacket, req, reply[:0]) }
	})
}

// TestPipeInterceptors: with interceptors, a pipe's call goes through them
// (on a goroutine of its own) and completes as any other, its done
// function able to start the next.
func TestPipeInterceptors(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	var seen sync.Map
	icpt := func(ctx context.Context, info *client.CallInfo, req, reply []byte, next client.Invoker) ([]byte, error) {
		seen.Store(string(req), true)
		return next(ctx, req, reply)
	}
	c := dial(t, s.Addr().String(), client.Options{Interceptors: []client.Interceptor{icpt}})
	got := make(chan string, 2)
	var p *client.Pipe
	p = c.NewPipe(1, func(tag int, reply []byte, err error) {
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(reply)
		if tag == 0 {
			p.Next(1, proto.CodecRaw, builtin.EchoPacket, []byte("two"), nil)
		}
	})
	p.Call(0, proto.CodecRaw, builtin.EchoPacket, []byte("one"), nil)
	for _, want := range []string{"one", "two"} {
		select {
		case g := <-got:
			if g != want {
				t.Fatalf("through an interceptor: %q, want %q", g, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no answer for %q", want)
		}
		if _, ok := seen.Load(want); !ok {
			t.Errorf("the interceptor did not see %q", want)
		}
	}
}

// TestPipeClose: a closed pipe's call in flight completes as it would
// have, a call started after Close fails with ErrPipeClosed before Call
// returns, and once the pipe's calls have ended no connection keeps it.
func TestPipeClose(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	c := dial(t, s.Addr().String(), client.Options{Timeout: 300 * time.Millisecond})
	got := make(chan error, 2)
	p := c.NewPipe(2, func(_ int, _ []byte, err error) { got <- err })
	p.Call(0, proto.CodecRaw, "Block/Forever", nil, nil) // held by the server until its deadline
	p.Close()
	p.Call(1, proto.CodecRaw, builtin.EchoPacket, []byte("x"), nil)
	select {
	case err := <-got:
		if !errors.Is(err, client.ErrPipeClosed) {
			t.Fatalf("a call after Close: %v, want ErrPipeClosed", err)
		}
	default:
		t.Fatal("a call after Close did not fail before Call returned")
	}
	if n := client.PipesListed(c); n != 1 {
		t.Fatalf("%d pipes listed with a call in flight, want 1", n)
	}
	q := c.NewPipe(1, func(_ int, _ []byte, err error) { got <- err })
	q.Call(0, proto.CodecRaw, builtin.EchoPacket, []byte("y"), nil)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if n := client.PipesListed(c); n != 2 {
		t.Fatalf("%d pipes listed, want 2: the closed one's call and the open one", n)
	}
	q.Close()
	if n := client.PipesListed(c); n != 1 {
		t.Fatalf("%d pipes listed after an idle pipe closed, want 1", n)
	}
	if err := <-got; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the call in flight at Close: %v, want its deadline", err)
	}
	if n := client.PipesListed(c); n != 0 {
		t.Fatalf("%d pipes listed once the closed pipe's call ended, want 0", n)
	}
}

// cut closes every connection through the proxy, as a lost network would.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, nc := range p.conns {
		nc.Close()
	}
	p.conns = nil
}

// TestPipeStress: pipes on a client of two connections, each tag a closed
// loop started from its done function, while another goroutine calls
// through a pipe of its own and the connections are cut three times: no
// call completes twice or without having been started, every tag's loop
// goes on across the cuts, and each ends once asked to.
func TestPipeStress(t *testing.T) {
	s := server(t, "127.0.0.1:0")
	px := newProxy(t, s.Addr().String())
	opts := fast
	opts.Conns = 2
	opts.Timeout = 2 * time.Second
	c := dial(t, px.addr(), opts)

	const pipes, tags = 3, 16
	var stop atomic.Bool
	var running sync.WaitGroup
	type tagState struct {
		inFlight          bool
		calls, ok, failed int
		req, reply        []byte
	}
	states := make([][]tagState, pipes)
	ps := make([]*client.Pipe, pipes)
	for i := range ps {
		st := make([]tagState, tags)
		states[i] = st
		var p *client.Pipe
		p = c.NewPipe(tags, func(tag int, got []byte, err error) {
			ts := &st[tag]
			if !ts.inFlight {
				t.Errorf("pipe %d, tag %d: a completion with no call in flight", i, tag)
			}
			ts.inFlight = false
			if err == nil && !bytes.Equal(got, ts.req) {
				t.Errorf("pipe %d, tag %d: reply %q to %q", i, tag, got, ts.req)
			}
			if err == nil {
				ts.ok++
			} else {
				ts.failed++
			}
			if stop.Load() {
				running.Done()
				return
			}
			ts.calls++
			ts.req = append(ts.req[:0], byte(i), byte(tag), byte(ts.calls))
			ts.inFlight = true
			p.Next(tag, proto.CodecRaw, builtin.EchoPacket, ts.req, ts.reply[:0])
		})
		ps[i] = p
		running.Add(tags)
		p.Run(func() {
			for tag := range st {
				st[tag].req, st[tag].reply, st[tag].inFlight = []byte{byte(i), byte(tag)}, make([]byte, 0, 8), true
				p.Next(tag, proto.CodecRaw, builtin.EchoPacket, st[tag].req, st[tag].reply[:0])
			}
		})
	}
	others := make(chan error, 1)
	var other sync.WaitGroup
	other.Add(1)
	go func() { // calls from a goroutine of their own, one at a time
		defer other.Done()
		q := c.NewPipe(1, func(_ int, _ []byte, err error) { others <- err })
		defer q.Close()
		for !stop.Load() {
			q.Call(0, proto.CodecRaw, builtin.EchoPacket, []byte("other"), nil)
			<-others
		}
	}()
	for range 3 {
		time.Sleep(150 * time.Millisecond)
		px.cut()
	}
	time.Sleep(300 * time.Millisecond) // the loops go on over new connections
	before := make([]int, pipes)
	for i, p := range ps {
		p.Run(func() {
			for _, ts := range states[i] {
				before[i] += ts.ok
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	stop.Store(true)
	waitGroup(t, &running, 10*time.Second)
	other.Wait()
	for i, p := range ps {
		p.Run(func() {
			ok, failed := 0, 0
			for tag, ts := range states[i] {
				if ts.inFlight {
					t.Errorf("pipe %d, tag %d: still in flight after its loop ended", i, tag)
				}
				ok, failed = ok+ts.ok, failed+ts.failed
			}
			t.Logf("pipe %d: %d answered, %d failed", i, ok, failed)
			if ok <= before[i] {
				t.Errorf("pipe %d: %d calls answered after the last cut's 300 ms, %d before; want more", i, ok, before[i])
			}
		})
		p.Close()
	}
}
