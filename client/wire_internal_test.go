package client

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// TestWriteFailureWaitsForTheReadSide: a failed write does not fail the
// wire's calls at once. The server's GoAway, sent before it reset the
// connection, is read first, so the call it excluded fails Unprocessed (to
// be sent again) and the one it took in fails with its fate unknown; no
// frame is sent after the failure.
func TestWriteFailureWaitsForTheReadSide(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	failed := make(chan struct{}) // the client's write has failed
	served := make(chan error, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer nc.Close()
		br := bufio.NewReader(nc)
		for range 2 { // calls 1 and 2
			h, err := br.Peek(proto.HeaderSize)
			if err != nil {
				served <- err
				return
			}
			hd, err := proto.DecodeHeader(h, nil)
			if err != nil {
				served <- err
				return
			}
			if _, err := br.Discard(hd.Len()); err != nil {
				served <- err
				return
			}
		}
		<-failed
		// Call 1 was taken in, call 2 was not; then a reset.
		if _, err := nc.Write(proto.AppendGoAway(nil, 1, proto.CodeUnavailable, "going")); err != nil {
			served <- err
			return
		}
		nc.(*net.TCPConn).SetLinger(0)
		served <- nil
	}()

	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	watch := newLingerWatch()
	defer watch.stop()
	w := newWire(nc, &Options{Limits: proto.Limits{}.WithDefaults()}, proto.CompressionNone, &serving{subs: &subTable{}}, nil, watch)
	defer w.close(nil)
	calls := []*call{getCall(), getCall()}
	for i, cl := range calls {
		if _, err := w.register(cl); err != nil {
			t.Fatal(err)
		}
		if cl.id != uint32(i+1) {
			t.Fatalf("call %d has id %d", i+1, cl.id)
		}
		h := proto.Header{Kind: proto.KindRequest, ID: cl.id}
		if err := w.enqueueRequest(h, "Any/Route", nil, nil, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}

	w.writeFailed(errors.New("write: broken pipe"))
	cl3 := getCall()
	if _, err := w.register(cl3); err != nil {
		t.Fatal(err)
	}
	err = w.enqueueRequest(proto.Header{Kind: proto.KindRequest, ID: cl3.id}, "Any/Route", nil, nil, time.Time{})
	if !handler.IsUnprocessed(err) || w.usable() {
		t.Fatalf("a frame after the failed write: %v (usable %v), want Unprocessed and an unusable wire", err, w.usable())
	}
	w.forget(cl3)
	select {
	case <-w.done:
		t.Fatal("the wire failed before its read side saw the connection end")
	case <-time.After(20 * time.Millisecond):
	}
	close(failed)
	if err := <-served; err != nil {
		t.Fatal(err)
	}

	for i, cl := range calls {
		select {
		case <-cl.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("call %d still waits", i+1)
		}
	}
	if e := calls[0].err; handler.CodeOf(e) != proto.CodeUnavailable || handler.IsUnprocessed(e) {
		t.Errorf("call 1, taken in: %v, want Unavailable with its fate unknown", e)
	}
	if e := calls[1].err; handler.CodeOf(e) != proto.CodeUnavailable || !handler.IsUnprocessed(e) {
		t.Errorf("call 2, excluded by the GoAway: %v, want Unavailable, Unprocessed", e)
	}
}

// TestWatchLetsIdleWiresGo: once its callers stop, a connection goes back
// to its listener and out of the client's linger watch, so an idle client
// keeps no watch timer running; its listener then reads for it.
func TestWatchLetsIdleWiresGo(t *testing.T) {
	if testEventLoops {
		t.Skip("event loops read every connection: there are no listeners")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // answer every request with its payload, until the client goes
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		br := bufio.NewReader(nc)
		for {
			b, err := br.Peek(proto.HeaderSize)
			if err != nil {
				return
			}
			h, err := proto.DecodeHeader(b, nil)
			if err != nil {
				return
			}
			b, err = br.Peek(h.Len())
			if err != nil {
				return
			}
			f, _, err := proto.Decode(b, nil)
			if err != nil {
				return
			}
			if f.Kind == proto.KindRequest {
				_, _ = nc.Write(proto.AppendFrame(nil, proto.Header{Kind: proto.KindResponse, ID: f.ID}, "", nil, f.Payload))
			}
			_, _ = br.Discard(h.Len())
		}
	}()

	c, err := Dial(context.Background(), ln.Addr().String(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reply := make([]byte, 0, 8)
	for i := range 300 { // close together: the callers take over the reading
		if reply, err = c.CallRaw(context.Background(), "Any/Route", []byte("x"), reply[:0]); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	w := c.slots[0].w.Load()
	watched := func() int {
		c.watch.mu.Lock()
		defer c.watch.mu.Unlock()
		return len(c.watch.wires)
	}
	deadline := time.Now().Add(10 * time.Second)
	for watched() != 0 || !w.rd.tok.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the last call: %d wires watched, token held %v; want none, and the listener reading", watched(), w.rd.tok.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if reply, err = c.CallRaw(context.Background(), "Any/Route", []byte("y"), reply[:0]); err != nil || string(reply) != "y" {
		t.Fatalf("a call after the idle spell: %q, %v", reply, err)
	}
}

// TestWatchDropsHeldWires: a watched connection whose token stays held
// between two looks (by its listener, which may read for ever for a
// subscription, or by a caller with a slow reply, whose release brings it
// back) leaves the watch instead of keeping its timer running.
func TestWatchDropsHeldWires(t *testing.T) {
	nc, peer := net.Pipe()
	defer peer.Close()
	watch := newLingerWatch()
	defer watch.stop()
	w := newWire(nc, &Options{Limits: proto.Limits{}.WithDefaults()}, proto.CompressionNone, &serving{subs: &subTable{}}, nil, watch)
	defer w.close(nil)
	for deadline := time.Now().Add(10 * time.Second); !w.rd.tok.Load(); { // the listener takes the token as it starts
		if time.Now().After(deadline) {
			t.Fatal("the listener did not take the token within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	watch.add(w) // as a caller's release that raced with the listener would
	watch.look() // first look: the token gets a whole period
	watch.look()
	watch.mu.Lock()
	n := len(watch.wires)
	watch.mu.Unlock()
	if n != 0 || w.rd.watched.Load() {
		t.Fatalf("after two looks at a held token: %d wires watched (watched flag %v), want none", n, w.rd.watched.Load())
	}
	if w.rd.lingered.Load() {
		t.Fatal("the watch kicked the listener of a connection someone reads")
	}
}

// TestBigWriteBuffers: a written buffer that large frames grew past keepBuf
// goes to bigBufs, not to the wire's spare; the next large frame queued
// behind a write gets it, with what the queue held copied in front. A
// buffer larger than twice the frame limit is let go.
func TestBigWriteBuffers(t *testing.T) {
	for bigBufs.Get() != nil { // what other tests left
	}
	w := &wire{lim: proto.Limits{MaxFrameSize: 4 << 20}}
	w.recycleLocked(make([]byte, 100, 16<<20))
	if p, _ := bigBufs.Get().(*[]byte); p != nil {
		t.Fatalf("a %d-byte buffer was kept, over twice the frame limit", cap(*p))
	}
	const big = 2 << 20
	// sync.Pool may drop what is put (the race detector makes it drop a
	// quarter): put until the queue gets a pooled buffer.
	for range 100 {
		w.wbuf, w.spare = append(make([]byte, 0, 64), "queued"...), nil
		w.recycleLocked(make([]byte, 100, big))
		if w.spare != nil {
			t.Fatal("a buffer over keepBuf became the wire's spare")
		}
		w.roomLocked(1 << 20)
		if cap(w.wbuf) == big {
			break
		}
	}
	if cap(w.wbuf) != big || string(w.wbuf) != "queued" || len(w.wbuf) != len("queued") {
		t.Fatalf("queue after roomLocked: %d bytes (%q) of %d; want the pooled %d-byte buffer holding the queue", len(w.wbuf), w.wbuf, cap(w.wbuf), big)
	}
	// Room enough already: the queue is left as it is.
	before := &w.wbuf[:1][0]
	w.roomLocked(1 << 10)
	if &w.wbuf[:1][0] != before {
		t.Fatal("a queue with room was moved")
	}
}

// TestLargeFrameQueuedInPooledBuffer: a large request queued behind a write
// in progress goes into a buffer from bigBufs, after what was queued.
func TestLargeFrameQueuedInPooledBuffer(t *testing.T) {
	for bigBufs.Get() != nil { // what other tests left
	}
	const big = 2 << 20
	payload := make([]byte, 128<<10)
	h := proto.Header{Kind: proto.KindRequest, ID: 2}
	for range 100 { // sync.Pool may drop what is put: put until one is taken
		w := &wire{lim: proto.Limits{MaxFrameSize: 4 << 20}, done: make(chan struct{})}
		w.flushing = true // a write is in progress: frames queue
		w.wbuf = proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, "A/B", nil, []byte("small"))
		first := len(w.wbuf)
		w.recycleLocked(make([]byte, 0, big))
		if err := w.enqueueRequest(h, "A/B", nil, payload, time.Time{}); err != nil {
			t.Fatal(err)
		}
		if cap(w.wbuf) != big {
			continue
		}
		want := proto.AppendFrame(proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, "A/B", nil, []byte("small")), h, "A/B", nil, payload)
		if first == 0 || string(w.wbuf) != string(want) {
			t.Fatalf("queue of %d bytes, want the small frame and the large one (%d bytes)", len(w.wbuf), len(want))
		}
		return
	}
	t.Fatal("a large frame queued behind a write never took a buffer from bigBufs")
}

// TestPendingShards: a process's first client connections get tables of
// several shards, a client's many connections fewer each, and once the
// process holds many connections a new one gets one; a connection counts
// among the live ones from its dial to its client's Close.
func TestPendingShards(t *testing.T) {
	for _, tc := range []struct{ conns, live, want int }{
		{1, 1, pendingShards},
		{2, 2, max(1, pendingShards/2)},
		{pendingShards, pendingShards, 1},
		{1, 4, pendingShards},
		{1, 8 * pendingShards, 1},
	} {
		if got := shardsFor(tc.conns, tc.live); got != tc.want {
			t.Errorf("%d connections, %d live in the process: %d shards, want %d", tc.conns, tc.live, got, tc.want)
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				_, _ = io.Copy(io.Discard, nc)
			}()
		}
	}()
	before := liveWires.Load()
	c, err := Dial(context.Background(), ln.Addr().String(), Options{Conns: 2})
	if err != nil {
		t.Fatal(err)
	}
	if n := liveWires.Load() - before; n != 2 {
		t.Errorf("%d more live connections with a client of 2", n)
	}
	c.Close()
	if n := liveWires.Load() - before; n != 0 {
		t.Errorf("%d more live connections after Close", n)
	}
}
