package reactor_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// The edges: what clients rpcd did not write do to it. Each test is a
// loss a client written from docs/protocol.md alone met, and asserts that
// no call is lost.

// closeWrite shuts down the write side of a raw connection (a FIN; over
// TLS, a close_notify first).
func closeWrite(t *testing.T, nc net.Conn) {
	t.Helper()
	var err error
	switch c := nc.(type) {
	case *net.TCPConn:
		err = c.CloseWrite()
	case *tls.Conn:
		err = c.CloseWrite()
		if err == nil {
			err = c.NetConn().(*net.TCPConn).CloseWrite()
		}
	default:
		t.Fatalf("cannot half-close a %T", nc)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// readToEnd reads frames until the server closes, and returns them; it
// fails the test if the stream ends with bytes that are not a whole frame.
func readToEnd(t *testing.T, r *rawConn, within time.Duration) []proto.Frame {
	t.Helper()
	var fs []proto.Frame
	deadline := time.Now().Add(within)
	for {
		f, err := r.nextWithin(time.Until(deadline))
		if err == nil {
			fs = append(fs, f)
			continue
		}
		if !errors.Is(err, io.EOF) {
			t.Fatalf("after %d frames: %v", len(fs), err)
		}
		if len(r.in) > 0 {
			t.Fatalf("the stream ended inside a frame: %d bytes left", len(r.in))
		}
		return fs
	}
}

// countReplies checks that fs answers calls 1 to n, each once, with a
// Response of the size wanted, in any order, and nothing else but what
// allow admits.
func countReplies(t *testing.T, fs []proto.Frame, n, size int, allow func(proto.Frame) bool) {
	t.Helper()
	seen := make(map[uint32]bool)
	for _, f := range fs {
		switch {
		case f.Kind == proto.KindResponse && f.ID >= 1 && f.ID <= uint32(n) && !seen[f.ID]:
			if size >= 0 && len(f.Payload) != size {
				t.Fatalf("reply %d has %d bytes, want %d", f.ID, len(f.Payload), size)
			}
			seen[f.ID] = true
		case allow != nil && allow(f):
		default:
			t.Fatalf("unexpected frame %v id %d (%d bytes)", f.Kind, f.ID, len(f.Payload))
		}
	}
	if len(seen) != n {
		t.Fatalf("%d of %d calls answered", len(seen), n)
	}
}

// Edge 1: a client that pipelines large calls and reads its replies as
// fast as it can is held back by TCP flow control, never cut off: its
// unsent replies pass the high-water mark (MaxOutbound, 8 MiB) many times
// over.
func TestPipelinedReaderNotCut(t *testing.T) {
	for _, tc := range []struct {
		n, size int
	}{{32, 1 << 20}, {128, 256 << 10}} {
		t.Run(fmt.Sprintf("%dx%dKiB", tc.n, tc.size>>10), func(t *testing.T) {
			s := start(t, builtinRegistry(), reactor.Options{})
			h := newHealthy(t, s)
			r := dialRaw(t, s)
			payload := bytes.Repeat([]byte{0xA5}, tc.size)
			sent := make(chan error, 1)
			go func() {
				var err error
				for i := 1; i <= tc.n && err == nil; i++ {
					_, err = r.nc.Write(proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: uint32(i)}, builtin.EchoPacket, nil, payload))
				}
				sent <- err
			}()
			var fs []proto.Frame
			for len(fs) < tc.n {
				f, err := r.nextWithin(30 * time.Second)
				if err != nil {
					t.Fatalf("after %d replies: %v", len(fs), err)
				}
				fs = append(fs, f)
			}
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
			countReplies(t, fs, tc.n, tc.size, nil)
			h.check()
		})
	}
}

// Edge 1, rpcd's own client: futures pipeline 64 calls of 1 MiB on one
// connection, more than the server's high-water mark and the sockets'
// buffers hold; the client reads while it writes, so none is lost and
// nothing stalls.
func TestClientPipelinesLargeCalls(t *testing.T) {
	s := start(t, builtinRegistry(), reactor.Options{})
	c := dial(t, s, client.Options{Conns: 1})
	payload := bytes.Repeat([]byte{0x3C}, 1<<20)
	ctx := ctxT(t)
	var fs []*client.Future
	for range 64 {
		fs = append(fs, c.GoRaw(ctx, builtin.EchoPacket, payload))
	}
	for i, f := range fs {
		if err := f.Wait(); err != nil || !bytes.Equal(f.Reply(), payload) {
			t.Fatalf("call %d: %d bytes, %v", i, len(f.Reply()), err)
		}
	}
}

// Edge 2: after a client's FIN the server answers every call it has read
// (inline, on the Blocking pool, large replies), then closes.
func TestHalfCloseAnswersAll(t *testing.T) {
	reg := builtinRegistry()
	reg.HandleFunc("Slow/Echo", func(ctx context.Context, req, reply []byte) ([]byte, error) {
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return append(reply, req...), nil
	}, handler.Blocking())
	s := start(t, reg, reactor.Options{})
	h := newHealthy(t, s)
	for _, tc := range []struct {
		name  string
		route string
		n     int
		size  int
	}{
		{"200 blocking", "Slow/Echo", 200, 16},
		{"8x1MiB inline", builtin.EchoPacket, 8, 1 << 20},
		{"500 inline", builtin.EchoPacket, 500, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			baseline(t)
			r := dialRaw(t, s)
			payload := bytes.Repeat([]byte{7}, tc.size)
			var batch []byte
			for i := 1; i <= tc.n; i++ {
				batch = proto.AppendFrame(batch, proto.Header{Kind: proto.KindRequest, ID: uint32(i)}, tc.route, nil, payload)
			}
			sent := make(chan error, 1)
			go func() {
				_, err := r.nc.Write(batch)
				if err == nil {
					closeWrite(t, r.nc)
				}
				sent <- err
			}()
			fs := readToEnd(t, r, 30*time.Second)
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
			// A Ping may come after the FIN, to tell a half-closed peer
			// from one gone for good: it cannot be answered, and need not.
			countReplies(t, fs, tc.n, tc.size, func(f proto.Frame) bool { return f.Kind == proto.KindPing })
			r.nc.Close()
		})
	}
	h.check()
}

// Edge 2, the other half: a peer that closes for good sends the same FIN
// as one that half-closes; its Blocking calls are cancelled at once, not
// run for no one.
func TestClosedPeerCancelsCalls(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a closed peer is told from a half-closed one by TCP_INFO, Linux's (peergone_linux.go): elsewhere its calls run until WriteTimeout")
	}
	reg := builtinRegistry()
	started, cancelled := make(chan struct{}, 8), make(chan struct{}, 8)
	reg.HandleFunc("Wait/Cancel", func(ctx context.Context, _, reply []byte) ([]byte, error) {
		started <- struct{}{}
		<-ctx.Done()
		cancelled <- struct{}{}
		return reply, ctx.Err()
	}, handler.Blocking())
	s := start(t, reg, reactor.Options{})
	baseline(t)
	r := dialRaw(t, s)
	var batch []byte
	for i := 1; i <= 8; i++ {
		batch = proto.AppendFrame(batch, proto.Header{Kind: proto.KindRequest, ID: uint32(i)}, "Wait/Cancel", nil, nil)
	}
	r.send(batch)
	// Each handler running (a call cancelled before its handler starts is
	// answered without running it, and would never say so here).
	for i := range 8 {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of 8 handlers started", i)
		}
	}
	r.nc.Close()
	for i := range 8 {
		select {
		case <-cancelled:
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of 8 calls cancelled 5s after their peer closed", i)
		}
	}
}

// Edge 3: the GoAway that ends a connection on a protocol error reaches
// the peer even when the peer has sent far more than the server read, and
// has yet to read what the server wrote before it: the server writes all
// it owes, shuts down its write side and reads what follows for a while
// before it closes, so that its close neither resets the connection nor
// drops the GoAway from its send queue.
func TestGoAwayOutlivesUnreadInput(t *testing.T) {
	s := start(t, builtinRegistry(), reactor.Options{})
	h := newHealthy(t, s)
	baseline(t)
	junk := bytes.Repeat([]byte{0x5A}, 1<<20)
	bad := proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 99}, "A/B", nil, nil)[:proto.HeaderSize]
	bad[20], bad[21], bad[22], bad[23] = 0x7F, 0xFF, 0xFF, 0xFF // past any frame limit
	for _, tc := range []struct {
		name  string
		peers int
		calls int // 64 KiB echoes before the bad frame, their replies unread for a while
	}{
		{"bad frame then 1MiB", 50, 0},
		{"replies unread", 10, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var input []byte
			for i := 1; i <= tc.calls; i++ {
				input = proto.AppendFrame(input, proto.Header{Kind: proto.KindRequest, ID: uint32(i)}, builtin.EchoPacket, nil, junk[:64<<10])
			}
			input = append(append(input, bad...), junk...)
			var wg sync.WaitGroup
			errs := make(chan error, tc.peers)
			for range tc.peers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- goAwayAfter(t, s, input, tc.calls)
				}()
			}
			wg.Wait()
			close(errs)
			lost := 0
			for err := range errs {
				if err != nil {
					lost++
					t.Log(err)
				}
			}
			if lost > 0 {
				t.Fatalf("%d of %d peers did not see every reply and the GoAway", lost, tc.peers)
			}
		})
	}
	h.check()
}

// goAwayAfter sends input on a new connection, reading nothing for a
// while, then reads: calls replies, a GoAway, the end.
func goAwayAfter(t *testing.T, s *reactor.Server, input []byte, calls int) error {
	r := dialRaw(t, s)
	defer r.nc.Close()
	if tc, ok := r.nc.(*net.TCPConn); ok {
		tc.SetReadBuffer(16 << 10) // the replies fill what the kernel holds for us
	}
	go func() {
		r.nc.SetWriteDeadline(time.Now().Add(20 * time.Second))
		r.nc.Write(input) // fails once the server has closed, if it gets that far
	}()
	time.Sleep(200 * time.Millisecond) // the server has read the bad frame by now, if it could
	for i := 1; ; i++ {
		f, err := r.nextWithin(20 * time.Second)
		switch {
		case err != nil:
			return fmt.Errorf("frame %d: %v", i, err)
		case i <= calls && (f.Kind != proto.KindResponse || f.ID != uint32(i)):
			return fmt.Errorf("frame %d: %v id %d, want the reply to call %d", i, f.Kind, f.ID, i)
		case i <= calls:
			continue
		case f.Kind != proto.KindGoAway:
			return fmt.Errorf("frame %d: %v, want GoAway", i, f.Kind)
		}
		if _, err := r.nextWithin(20 * time.Second); !errors.Is(err, io.EOF) {
			return fmt.Errorf("after the GoAway: %v, want the end of the stream", err)
		}
		return nil
	}
}

// TestFrameOutcomes: frames a conforming client never sends, each with the
// outcome docs/protocol.md gives it; and their lawful neighbours, served.
func TestFrameOutcomes(t *testing.T) {
	reg := builtinRegistry()
	reg.HandleFunc("Block/Echo", func(_ context.Context, req, reply []byte) ([]byte, error) {
		return append(reply, req...), nil
	}, handler.Blocking())
	s := start(t, reg, reactor.Options{})
	h := newHealthy(t, s)
	req := func(id uint32, route string) []byte {
		return proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: id}, route, nil, []byte("x"))
	}
	goAway := proto.AppendGoAway(nil, 0, proto.CodeUnavailable, "client going away")
	for _, tc := range []struct {
		name string
		in   [][]byte
		want []proto.Kind // the frames back, in order; a GoAway last means the connection ends
	}{
		{"a Welcome from the client", [][]byte{proto.AppendWelcome(nil, "me")}, []proto.Kind{proto.KindGoAway}},
		{"a second Hello", [][]byte{proto.AppendHello(nil, "", nil), proto.AppendHello(nil, "", nil)}, []proto.Kind{proto.KindWelcome, proto.KindGoAway}},
		{"a Hello after a call", [][]byte{req(1, builtin.EchoPacket), proto.AppendHello(nil, "", nil, proto.CompressionGzip)}, []proto.Kind{proto.KindResponse, proto.KindGoAway}},
		{"a Hello after a Ping", [][]byte{proto.AppendPing(nil, nil), proto.AppendHello(nil, "", nil), req(1, builtin.EchoPacket)}, []proto.Kind{proto.KindPong, proto.KindWelcome, proto.KindResponse}},
		{"a call after the client's GoAway", [][]byte{req(1, builtin.EchoPacket), goAway, req(2, builtin.EchoPacket)}, []proto.Kind{proto.KindResponse, proto.KindGoAway}},
		{"a stream after the client's GoAway", [][]byte{goAway, proto.AppendStreamOpen(nil, 1, builtin.StreamSink, proto.CodecRaw, 0, nil, 1024)}, []proto.Kind{proto.KindGoAway}},
		{"a Ping and a Cancel after the client's GoAway", [][]byte{req(1, builtin.EchoPacket), goAway, proto.AppendCancel(nil, 9), proto.AppendPing(nil, []byte("p"))}, []proto.Kind{proto.KindResponse, proto.KindPong}},
		{"a StreamReset with code 0 from the opener", [][]byte{proto.AppendStreamReset(nil, 1, 0, proto.CodeOK, "")}, []proto.Kind{proto.KindGoAway}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, s)
			for _, b := range tc.in {
				r.send(b)
			}
			var got []proto.Kind
			for len(got) < len(tc.want) {
				f, err := r.nextWithin(5 * time.Second)
				if err != nil {
					t.Fatalf("after %v: %v; want %v", got, err, tc.want)
				}
				if f.Kind == proto.KindGoAway {
					if _, code, msg := f.GoAwayBody(); code != proto.CodeInternal {
						t.Fatalf("GoAway %v %q, want Internal", code, msg)
					}
				}
				got = append(got, f.Kind)
			}
			if tc.want[len(tc.want)-1] == proto.KindGoAway {
				if _, err := r.nextWithin(5 * time.Second); !errors.Is(err, io.EOF) {
					t.Fatalf("after the GoAway: %v, want the end", err)
				}
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
	h.check()
}

// TestNoCallsToAPeerGoingAway: once a client has sent its GoAway, the
// server starts nothing more on its connection: a handler's call, push or
// stream to it is refused as Unavailable and unprocessed.
func TestNoCallsToAPeerGoingAway(t *testing.T) {
	reg := builtinRegistry()
	proceed := make(chan struct{})
	results := make(chan error, 3)
	reg.HandleFunc("Call/Back", func(ctx context.Context, _, reply []byte) ([]byte, error) {
		<-proceed
		p := handler.CallFrom(ctx).Peer
		_, err := p.CallRaw(ctx, "Client/Route", nil, nil)
		results <- err
		results <- p.NotifyRaw(ctx, "Client/Route", nil)
		_, err = p.(handler.StreamOpener).OpenStream(ctx, "Client/Stream")
		results <- err
		return reply, nil
	}, handler.Blocking())
	s := start(t, reg, reactor.Options{})
	r := dialRaw(t, s)
	r.send(proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, "Call/Back", nil, nil))
	r.send(proto.AppendGoAway(nil, 0, proto.CodeUnavailable, "client going away"))
	r.send(proto.AppendPing(nil, nil))
	if f, err := r.next(); err != nil || f.Kind != proto.KindPong {
		t.Fatalf("%v %v, want the Pong", f.Kind, err)
	}
	close(proceed)
	for range 3 {
		if err := <-results; handler.CodeOf(err) != proto.CodeUnavailable || !handler.IsUnprocessed(err) {
			t.Fatalf("a call to a client going away: %v, want Unavailable, unprocessed", err)
		}
	}
	if f, err := r.next(); err != nil || f.Kind != proto.KindResponse || f.ID != 1 {
		t.Fatalf("%v id %d %v, want the Response to call 1", f.Kind, f.ID, err)
	}
}

// TestCancelledBeforeItRan: a Blocking call cancelled while it waits for a
// worker is answered Canceled with the Unprocessed flag: it never ran, and
// its caller may send it again.
func TestCancelledBeforeItRan(t *testing.T) {
	reg := builtinRegistry()
	release := make(chan struct{})
	ran := make(chan uint32, 2)
	reg.HandleFunc("Hold/On", func(ctx context.Context, req, reply []byte) ([]byte, error) {
		ran <- handler.CallFrom(ctx).ID
		<-release
		return append(reply, req...), nil
	}, handler.Blocking())
	s := start(t, reg, reactor.Options{BlockingWorkers: 1})
	r := dialRaw(t, s)
	r.send(proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, "Hold/On", nil, []byte("a")))
	if id := <-ran; id != 1 {
		t.Fatalf("call %d ran first", id)
	}
	r.send(proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 2}, "Hold/On", nil, []byte("b")))
	waitStats(t, s, "call 2 queued", func(st reactor.Stats) bool { return st.Blocking == 2 })
	r.send(proto.AppendCancel(nil, 2))
	r.send(proto.AppendPing(nil, nil))
	if f, err := r.next(); err != nil || f.Kind != proto.KindPong {
		t.Fatalf("%v %v, want the Pong: the Cancel is read", f.Kind, err)
	}
	close(release)
	for range 2 {
		f, err := r.next()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case f.ID == 1 && f.Kind == proto.KindResponse:
		case f.ID == 2 && f.Kind == proto.KindError:
			if code, msg := f.ErrorBody(); code != proto.CodeCanceled || f.Flags&proto.FlagUnprocessed == 0 {
				t.Fatalf("the call cancelled before it ran: code %v flags %v %q, want Canceled, Unprocessed", code, f.Flags, msg)
			}
		default:
			t.Fatalf("%v id %d", f.Kind, f.ID)
		}
	}
	select {
	case id := <-ran:
		t.Fatalf("call %d ran after its cancel", id)
	default:
	}
}
