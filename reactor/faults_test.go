package reactor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// The faults of docs/reliability.md, each with a test that asserts the
// server's answer, that a healthy client on another connection is still
// served, and that goroutines and open files return to what they were.

// healthy is a client on its own connection that must keep being served.
type healthy struct {
	t *testing.T
	c *client.Client
}

func newHealthy(t *testing.T, s *reactor.Server) healthy {
	h := healthy{t, dial(t, s, client.Options{})}
	h.check() // the server has taken the connection in before any baseline
	return h
}

func (h healthy) check() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if reply, err := h.c.CallRaw(ctx, builtin.EchoPacket, []byte("still served"), nil); err != nil || string(reply) != "still served" {
		h.t.Fatalf("the healthy client: %q, %v", reply, err)
	}
}

// resources counts goroutines and open file descriptors. The descriptors
// are read from /proc, so are counted on Linux alone: elsewhere files is 0,
// and only goroutines are compared.
type resources struct{ goroutines, files int }

func count() resources {
	fds, _ := os.ReadDir("/proc/self/fd")
	return resources{runtime.NumGoroutine(), len(fds)}
}

// baseline records the resources now and, when the test ends, waits a
// bounded time for them to come back down to that.
func baseline(t *testing.T) {
	t.Helper()
	baselineAllowing(t, func() int { return 0 })
}

// baselineAllowing is baseline with extra() more goroutines allowed at the
// end: those of connections that are still open and have left their event
// loop for a goroutine of their own (reactor.Stats.HandedOff), as one
// whose client reads a large reply slowly may (it does under the race
// detector on a busy machine).
func baselineAllowing(t *testing.T, extra func() int) {
	t.Helper()
	before, files := count(), openFiles()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			now := count()
			if now.goroutines <= before.goroutines+extra() && now.files <= before.files {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("goroutines %d, open files %d; before the fault %d and %d\nbefore:\n%s\nafter:\n%s", now.goroutines, now.files, before.goroutines, before.files, files, openFiles())
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// openFiles lists the process's open descriptors, for a failure message;
// a TCP socket with its addresses and state.
func openFiles() string {
	sockets := tcpSockets()
	fds, _ := os.ReadDir("/proc/self/fd")
	out := ""
	for _, fd := range fds {
		target, _ := os.Readlink("/proc/self/fd/" + fd.Name())
		out += fd.Name() + " -> " + target + " " + sockets[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] + "\n"
	}
	return out
}

// tcpSockets maps the inode of each of the process's TCP sockets to its
// local and remote addresses and state, as /proc/self/net/tcp has them.
func tcpSockets() map[string]string {
	m := map[string]string{}
	for _, file := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		b, _ := os.ReadFile(file)
		for _, line := range strings.Split(string(b), "\n")[1:] {
			if f := strings.Fields(line); len(f) > 9 {
				m[f[9]] = f[1] + "->" + f[2] + " state " + f[3]
			}
		}
	}
	return m
}

// expectGoAway reads until the server's GoAway and the end of the stream,
// and returns the GoAway's code and message.
func expectGoAway(t *testing.T, r *rawConn, within time.Duration) (proto.Code, string) {
	t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(within))
	for {
		f, err := r.nextWithin(within)
		if err != nil {
			t.Fatalf("no GoAway within %v: %v", within, err)
		}
		if f.Kind == proto.KindGoAway {
			_, code, msg := f.GoAwayBody()
			// The end of the stream; a reset if the server closed with our
			// bytes still unread.
			if _, err := r.nextWithin(within); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("connection open after its GoAway: %v", err)
			}
			return code, string(msg)
		}
	}
}

// Fault 1, and fault 9: a frame begun and never finished, whether it stops
// or comes a byte at a time, is cut off by the whole-frame deadline.
func TestFrameTimeout(t *testing.T) {
	s := start(t, builtinRegistry(), reactor.Options{FrameTimeout: 200 * time.Millisecond})
	h := newHealthy(t, s)
	baseline(t)
	frame := proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, builtin.EchoPacket, nil, make([]byte, 100))

	t.Run("truncated then silent", func(t *testing.T) {
		r := dialRaw(t, s)
		r.send(frame[:30])
		if code, msg := expectGoAway(t, r, 5*time.Second); code != proto.CodeDeadlineExceeded {
			t.Fatalf("GoAway %v %q", code, msg)
		}
		h.check()
	})
	t.Run("a byte at a time", func(t *testing.T) {
		r := dialRaw(t, s)
		stop := make(chan struct{})
		go func() {
			for i := range frame {
				select {
				case <-stop:
					return
				case <-time.After(40 * time.Millisecond):
				}
				if _, err := r.nc.Write(frame[i : i+1]); err != nil {
					return
				}
			}
		}()
		defer close(stop)
		if code, msg := expectGoAway(t, r, 5*time.Second); code != proto.CodeDeadlineExceeded {
			t.Fatalf("GoAway %v %q", code, msg)
		}
		h.check()
	})
}

// Fault 9, the idle half: with IdleTimeout set, a connection that sends
// nothing is closed.
func TestIdleTimeout(t *testing.T) {
	s := start(t, builtinRegistry(), reactor.Options{IdleTimeout: 200 * time.Millisecond, KeepAlive: -1})
	baseline(t)
	r := dialRaw(t, s)
	if code, _ := expectGoAway(t, r, 5*time.Second); code != proto.CodeUnavailable {
		t.Fatalf("GoAway code %v", code)
	}
}

// Fault 12: a peer that stops answering (gone without a FIN, or just
// silent) is pinged, and closed when the ping goes unanswered; a client that
// answers pings stays connected while idle.
func TestKeepAlive(t *testing.T) {
	s := start(t, builtinRegistry(), reactor.Options{KeepAlive: 100 * time.Millisecond, KeepAliveTimeout: 200 * time.Millisecond})
	h := newHealthy(t, s) // answers pings: rpcd's client replies Pong
	baseline(t)
	r := dialRaw(t, s)
	begin := time.Now()
	f, err := r.nextWithin(5 * time.Second)
	if err != nil || f.Kind != proto.KindPing {
		t.Fatalf("the silent peer got %v, %v; want a Ping", f.Kind, err)
	}
	code, msg := expectGoAway(t, r, 5*time.Second)
	if code != proto.CodeUnavailable {
		t.Fatalf("GoAway %v %q", code, msg)
	}
	if d := time.Since(begin); d < 200*time.Millisecond {
		t.Fatalf("closed %v after its ping, before the ping timeout", d)
	}
	time.Sleep(500 * time.Millisecond) // several keep-alive periods
	h.check()
}

// Fault 10: past MaxConns, new connections are refused at once; those
// already open are served.
func TestMaxConns(t *testing.T) {
	s := start(t, builtinRegistry(), reactor.Options{MaxConns: 3})
	h := newHealthy(t, s) // one
	baseline(t)
	held := []*rawConn{dialRaw(t, s), dialRaw(t, s)} // two and three
	for _, r := range held {
		r.send(proto.AppendPing(nil, nil))
		if f, err := r.next(); err != nil || f.Kind != proto.KindPong {
			t.Fatalf("a connection under the limit: %v, %v", f.Kind, err)
		}
	}
	over := dialRaw(t, s)
	if code, msg := expectGoAway(t, over, 5*time.Second); code != proto.CodeResourceExhausted {
		t.Fatalf("the connection past the limit: GoAway %v %q", code, msg)
	}
	h.check()
	held[0].nc.Close()
	// A slot frees up: a new connection is served again.
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := dialRaw(t, s)
		r.send(proto.AppendPing(nil, nil))
		f, err := r.next()
		if err == nil && f.Kind == proto.KindPong {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection served after one closed: %v %v", f.Kind, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Fault 8: a peer that sends calls and never reads their replies is held
// back by TCP: once the socket takes no more of its output, the server
// stops reading the connection, and the peer's writes block. It is cut off
// once it has taken nothing for WriteTimeout, and the server's memory for
// it stays bounded meanwhile: a few replies, not all it asked for.
func TestPeerThatNeverReads(t *testing.T) {
	s := start(t, builtinRegistry(), reactor.Options{WriteTimeout: time.Second})
	h := newHealthy(t, s)
	baseline(t)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.(*net.TCPConn).SetReadBuffer(4096) // let the kernel hold little for us
	payload := make([]byte, 512<<10)
	frame := proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, builtin.EchoPacket, nil, payload)
	closed := make(chan error, 1)
	var peak atomic.Uint64
	var sent atomic.Int64
	go func() {
		for i := 0; ; i++ {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak.Store(max(peak.Load(), m.HeapInuse))
			nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := nc.Write(frame); err != nil {
				closed <- err
				return
			}
			if sent.Add(1) > 400 { // 200 MiB of replies asked for: the peer should have been held back long before
				closed <- errors.New("never held back")
				return
			}
		}
	}()
	select {
	case err := <-closed:
		// The server closed the connection: a write fails with a reset or
		// a broken pipe, not a timeout (a server that stopped reading for
		// good).
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || err.Error() == "never held back" {
			t.Fatalf("the peer that never reads, after %d calls: %v", sent.Load(), err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the peer that never reads was not cut off within 20s")
	}
	// The kernel's buffers on both sides hold some of the calls; the
	// server holds at most a read's worth of replies.
	if n := sent.Load(); n > 64 {
		t.Fatalf("the peer got %d calls of 512 KiB in before it was held back", n)
	}
	const maxGrow = 16 << 20
	if grew := peak.Load() - min(peak.Load(), before.HeapInuse); grew > maxGrow {
		t.Fatalf("the heap grew by %d KiB while the peer flooded; want at most %d KiB", grew>>10, maxGrow>>10)
	}
	t.Logf("%d calls sent; heap growth at its peak: %d KiB", sent.Load(), (peak.Load()-min(peak.Load(), before.HeapInuse))>>10)
	h.check()
}

// Fault 15: a flood of calls cancelled at once never runs more blocking
// handlers at a time than MaxInflight.
func TestCancelFloodBounded(t *testing.T) {
	reg := builtinRegistry()
	var running, most atomic.Int64
	reg.HandleFunc("Slow/Op", func(ctx context.Context, _, reply []byte) ([]byte, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
		return reply, nil
	}, handler.Blocking())
	const limit = 8
	s := start(t, reg, reactor.Options{MaxInflight: limit})
	h := newHealthy(t, s)
	baseline(t)
	r := dialRaw(t, s)
	var flood []byte
	for id := uint32(1); id <= 2000; id++ {
		flood = proto.AppendFrame(flood, proto.Header{Kind: proto.KindRequest, ID: id}, "Slow/Op", nil, nil)
		flood = proto.AppendCancel(flood, id)
	}
	go func() { r.nc.Write(flood) }()
	refused := 0
	for seen := 0; seen < 2000; seen++ {
		f, err := r.nextWithin(10 * time.Second)
		if err != nil {
			t.Fatalf("after %d answers: %v", seen, err)
		}
		if f.Kind == proto.KindError {
			if code, _ := f.ErrorBody(); code == proto.CodeResourceExhausted {
				refused++
			}
		}
	}
	if m := most.Load(); m > limit {
		t.Fatalf("%d blocking handlers ran at once, the limit is %d", m, limit)
	}
	t.Logf("at most %d at once; %d calls refused as over the limit", most.Load(), refused)
	h.check()
}

// Fault 16: a frame arriving a byte per wake-up costs no allocation per
// byte (see TestOneByteSegmentsAllocs for the count); over TCP, it is
// answered like any other.
func TestOneByteSegments(t *testing.T) {
	s := start(t, builtinRegistry(), reactor.Options{})
	baseline(t)
	r := dialRaw(t, s)
	if tc, ok := r.nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	frame := proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 5}, builtin.EchoPacket, nil, []byte("one byte at a time"))
	for i := range frame {
		r.send(frame[i : i+1])
		time.Sleep(time.Millisecond)
	}
	if f, err := r.next(); err != nil || f.ID != 5 || string(f.Payload) != "one byte at a time" {
		t.Fatalf("reply %v %d %q, %v", f.Kind, f.ID, f.Payload, err)
	}
}

// Fault 17: a reply for a client that has gone, and writes to its closed
// connection, cost no panic and no leak.
func TestReplyToGoneClient(t *testing.T) {
	reg := builtinRegistry()
	release := make(chan struct{})
	reg.HandleFunc("Slow/Echo", func(_ context.Context, req, reply []byte) ([]byte, error) {
		<-release
		return append(reply, req...), nil
	}, handler.Blocking())
	s := start(t, reg, reactor.Options{})
	h := newHealthy(t, s)
	baseline(t)
	r := dialRaw(t, s)
	for id := uint32(1); id <= 20; id++ {
		r.send(proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: id}, "Slow/Echo", nil, make([]byte, 1000)))
	}
	time.Sleep(50 * time.Millisecond)
	r.nc.Close()
	time.Sleep(50 * time.Millisecond)
	close(release) // the replies now have nowhere to go
	h.check()
}

// Fault 2's memory half: a header announcing a 4 GiB frame is refused on
// the header alone; the server buffers nothing for it.
func TestHugeLengthNoBuffering(t *testing.T) {
	s := start(t, builtinRegistry(), reactor.Options{})
	h := newHealthy(t, s)
	baseline(t)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 50 {
		r := dialRaw(t, s)
		hdr := proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: uint32(i + 1)}, "A/B", nil, nil)[:proto.HeaderSize]
		hdr[20], hdr[21], hdr[22], hdr[23] = 0xFF, 0xFF, 0xFF, 0xFF
		r.send(hdr)
		r.send(make([]byte, 64<<10)) // the start of a "body"
		expectGoAway(t, r, 5*time.Second)
		r.nc.Close()
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 8<<20 {
		t.Fatalf("the heap grew by %d bytes over 50 refused 4 GiB frames", grew)
	}
	h.check()
}

// Fault 2's other half: headers announcing frames just under the limit,
// followed by a trickle of their bytes, hold memory in proportion to the
// bytes sent, not to the lengths announced; each frame, finished later, is
// answered whole.
func TestBigHeaderHoldsLittle(t *testing.T) {
	const conns, sent = 100, 1000
	s := start(t, builtinRegistry(), reactor.Options{})
	h := newHealthy(t, s)
	baseline(t)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	payload := make([]byte, 4<<20-100)
	for i := range payload {
		payload[i] = byte(i)
	}
	frame := func(i int) []byte {
		return proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: uint32(i + 1)}, builtin.EchoPacket, nil, payload)
	}
	raws := make([]*rawConn, conns)
	for i := range raws {
		raws[i] = dialRaw(t, s)
		raws[i].send(frame(i)[:proto.HeaderSize+sent])
	}
	h.check() // all of the above has been read by the server
	var held runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&held)
	// Before the buffers grew with the bytes, this was 100 × 4 MiB.
	if grew := int64(held.HeapInuse) - int64(before.HeapInuse); grew > 64<<20 {
		t.Fatalf("the heap grew by %d MiB for %d frames begun with %d bytes each", grew>>20, conns, sent)
	}
	for i, r := range raws[:3] {
		r.send(frame(i)[proto.HeaderSize+sent:])
		f, err := r.nextWithin(10 * time.Second)
		if err != nil || f.ID != uint32(i+1) || !bytes.Equal(f.Payload, payload) {
			t.Fatalf("frame %d finished: id %d, %d bytes back, %v", i+1, f.ID, len(f.Payload), err)
		}
	}
	for _, r := range raws {
		r.nc.Close()
	}
}

// nextWithin reads the next frame, waiting at most d.
func (r *rawConn) nextWithin(d time.Duration) (proto.Frame, error) {
	r.nc.SetReadDeadline(time.Now().Add(d))
	for {
		if f, n, err := proto.Decode(r.in, nil); err != nil {
			return proto.Frame{}, fmt.Errorf("undecodable bytes from the server: %w", err)
		} else if n > 0 {
			f.Payload = append([]byte(nil), f.Payload...)
			r.in = r.in[n:]
			return f, nil
		}
		buf := make([]byte, 64<<10)
		n, err := r.nc.Read(buf)
		r.in = append(r.in, buf[:n]...)
		if err != nil {
			return proto.Frame{}, err
		}
	}
}

// Fault 14: Shutdown under load loses no accepted call. Every call either
// gets its reply or an error the server marked unprocessed, and the server
// ran exactly the calls that got replies.
func TestShutdownUnderLoad(t *testing.T) {
	reg := handler.NewRegistry()
	var ran atomic.Int64
	reg.HandleFunc("Count/Inline", func(_ context.Context, req, reply []byte) ([]byte, error) {
		ran.Add(1)
		return append(reply, req...), nil
	})
	reg.HandleFunc("Count/Blocking", func(_ context.Context, req, reply []byte) ([]byte, error) {
		ran.Add(1)
		time.Sleep(2 * time.Millisecond)
		return append(reply, req...), nil
	}, handler.Blocking())
	s := newServer(t, reg, reactor.Options{})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	c := dial(t, s, client.Options{Conns: 4})
	var ok, unprocessed, other atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			route := "Count/Inline"
			if i%2 == 1 {
				route = "Count/Blocking"
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := c.CallRaw(ctx, route, []byte("x"), nil)
				cancel()
				switch {
				case err == nil:
					ok.Add(1)
				case handler.IsUnprocessed(err):
					unprocessed.Add(1)
				default:
					other.Add(1)
					t.Errorf("a call ended neither answered nor unprocessed: %v", err)
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	close(stop) // calls made after the server is gone fail fast, unprocessed
	wg.Wait()
	if ran.Load() != ok.Load() {
		t.Fatalf("the server ran %d calls, %d got replies: a call ran and its reply was lost, or a call ran twice", ran.Load(), ok.Load())
	}
	if ok.Load() == 0 || unprocessed.Load() == 0 {
		t.Fatalf("%d answered, %d unprocessed: the load did not span the shutdown", ok.Load(), unprocessed.Load())
	}
	t.Logf("%d answered, %d refused as unprocessed, %d other", ok.Load(), unprocessed.Load(), other.Load())
}

// TestShutdownRightAfterConnect: a connection still being handed to an
// event loop when Shutdown begins does not hold Shutdown up (it waited for
// a loop already stopped, until its context ended).
func TestShutdownRightAfterConnect(t *testing.T) {
	for i := range 30 {
		s := newServer(t, builtinRegistry(), reactor.Options{})
		if err := s.Start("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		nc, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = s.Shutdown(ctx)
		cancel()
		nc.Close()
		if err != nil {
			t.Fatalf("shutdown %d right after a connect: %v", i, err)
		}
	}
}
