package reactor_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// streamRoutes registers the stream routes the tests use:
//
//	File/Sum:  reads everything, answers the SHA-256 of it in hex
//	File/Gen:  reads an 8-byte size, writes that many bytes of seeded data
//	Echo:      writes back what it reads, as it reads it
//	Hold:      reads nothing until its context ends; counts it in held
//	Fail:      reads 1 byte, fails with the code it names
func streamRoutes(held *atomic.Int64) *handler.Registry {
	reg := handler.NewRegistry()
	reg.HandleStream("File/Sum", func(ctx context.Context, s handler.Stream) error {
		h := sha256.New()
		if _, err := io.Copy(h, s); err != nil {
			return err
		}
		_, err := s.Write([]byte(hex.EncodeToString(h.Sum(nil))))
		return err
	})
	reg.HandleStream("File/Gen", func(ctx context.Context, s handler.Stream) error {
		var size [8]byte
		if _, err := io.ReadFull(s, size[:]); err != nil {
			return err
		}
		_, err := io.Copy(s, io.LimitReader(newSeeded(1), int64(binary.BigEndian.Uint64(size[:]))))
		return err
	})
	reg.HandleStream("Echo", func(ctx context.Context, s handler.Stream) error {
		_, err := io.CopyBuffer(s, s, make([]byte, 16<<10))
		return err
	})
	reg.HandleStream("Hold", func(ctx context.Context, s handler.Stream) error {
		held.Add(1)
		defer held.Add(-1)
		<-ctx.Done()
		return ctx.Err()
	})
	reg.HandleStream("Fail", func(ctx context.Context, s handler.Stream) error {
		var b [1]byte
		if _, err := io.ReadFull(s, b[:]); err != nil {
			return err
		}
		return &handler.Error{Code: proto.Code(b[0]), Message: "failed as asked"}
	})
	reg.HandleFunc("Bytes/Echo", func(ctx context.Context, req, reply []byte) ([]byte, error) {
		return append(reply, req...), nil
	})
	return reg
}

// seeded is a fast deterministic byte source.
type seeded struct{ r *rand.ChaCha8 }

func newSeeded(seed byte) *seeded { return &seeded{rand.NewChaCha8([32]byte{seed})} }

func (s *seeded) Read(p []byte) (int, error) { return s.r.Read(p) }

func sumOf(r io.Reader) string {
	h := sha256.New()
	_, _ = io.Copy(h, r)
	return hex.EncodeToString(h.Sum(nil))
}

// readAll reads s to its end and returns what it read and Read's last
// error (nil at io.EOF).
func readAll(s handler.Stream) ([]byte, error) {
	b, err := io.ReadAll(s)
	return b, err
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 2000; i++ {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestStreamUpload: client to server, several windows' worth, answered at
// the end with a checksum; the stream ends cleanly.
func TestStreamUpload(t *testing.T) {
	s := start(t, streamRoutes(nil), reactor.Options{})
	c := dial(t, s, client.Options{})
	st, err := c.OpenStream(ctxT(t), "File/Sum")
	if err != nil {
		t.Fatal(err)
	}
	const size = 3<<20 + 12345
	if n, err := io.Copy(st, io.LimitReader(newSeeded(7), size)); err != nil || n != size {
		t.Fatalf("upload: %d bytes, %v", n, err)
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	got, err := readAll(st)
	if err != nil {
		t.Fatal(err)
	}
	if want := sumOf(io.LimitReader(newSeeded(7), size)); string(got) != want {
		t.Fatalf("server's sum %s, want %s", got, want)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v, want the handler's nil", err)
	}
	if _, err := st.Write([]byte("x")); err == nil {
		t.Fatal("Write after the stream finished succeeded")
	}
}

// TestStreamDownload: server to client, many windows' worth.
func TestStreamDownload(t *testing.T) {
	s := start(t, streamRoutes(nil), reactor.Options{})
	c := dial(t, s, client.Options{})
	st, err := c.OpenStream(ctxT(t), "File/Gen")
	if err != nil {
		t.Fatal(err)
	}
	const size = 5<<20 + 7
	if _, err := st.Write(binary.BigEndian.AppendUint64(nil, size)); err != nil {
		t.Fatal(err)
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := io.Copy(h, st)
	if err != nil || n != size {
		t.Fatalf("download: %d bytes, %v", n, err)
	}
	if got, want := hex.EncodeToString(h.Sum(nil)), sumOf(io.LimitReader(newSeeded(1), size)); got != want {
		t.Fatalf("sum %s, want %s", got, want)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestStreamBothWays: an echo with writing and reading interleaved on two
// goroutines, through a window much smaller than the data, on both sides.
func TestStreamBothWays(t *testing.T) {
	s := start(t, streamRoutes(nil), reactor.Options{StreamWindow: 32 << 10})
	c := dial(t, s, client.Options{StreamWindow: 48 << 10})
	st, err := c.OpenStream(ctxT(t), "Echo")
	if err != nil {
		t.Fatal(err)
	}
	const size = 2<<20 + 99
	werr := make(chan error, 1)
	go func() {
		_, err := io.Copy(st, io.LimitReader(newSeeded(3), size))
		if err == nil {
			err = st.CloseSend()
		}
		werr <- err
	}()
	got, err := readAll(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	want, _ := io.ReadAll(io.LimitReader(newSeeded(3), size))
	if !bytes.Equal(got, want) {
		t.Fatalf("echoed %d bytes, not the %d sent", len(got), len(want))
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// countingWriter writes to a stream in small pieces and counts what went.
func writeCounting(st handler.Stream, n *atomic.Int64) error {
	buf := make([]byte, 1024)
	for {
		if _, err := st.Write(buf); err != nil {
			return err
		}
		n.Add(int64(len(buf)))
	}
}

// TestStreamFlowControl: a receiver that does not read stops its sender
// at exactly the window it granted, in each direction; the sender's Write
// waits there until the stream is cancelled, which ends it with a clear
// error on both sides.
func TestStreamFlowControl(t *testing.T) {
	const serverWindow, clientWindow = 64 << 10, 96 << 10
	var held atomic.Int64
	reg := streamRoutes(&held)
	var sent atomic.Int64
	serverErr := make(chan error, 1)
	reg.HandleStream("Flood", func(ctx context.Context, s handler.Stream) error {
		err := writeCounting(s, &sent)
		serverErr <- err
		return err
	})
	s := start(t, reg, reactor.Options{StreamWindow: serverWindow})
	c := dial(t, s, client.Options{StreamWindow: clientWindow})

	t.Run("client to a server that does not read", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctxT(t))
		st, err := c.OpenStream(ctx, "Hold")
		if err != nil {
			t.Fatal(err)
		}
		var n atomic.Int64
		werr := make(chan error, 1)
		go func() { werr <- writeCounting(st, &n) }()
		waitFor(t, "the window to fill", func() bool { return n.Load() >= serverWindow })
		time.Sleep(100 * time.Millisecond) // room for a writer that ignores the window to go on
		if got := n.Load(); got != serverWindow {
			t.Fatalf("the client wrote %d bytes to a stream nobody reads, want the window, %d", got, serverWindow)
		}
		cancel()
		if err := <-werr; handler.CodeOf(err) != proto.CodeCanceled {
			t.Fatalf("the blocked Write returned %v, want Canceled", err)
		}
		waitFor(t, "the handler to see the cancel", func() bool { return held.Load() == 0 })
	})

	t.Run("server to a client that does not read", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctxT(t))
		defer cancel()
		st, err := c.OpenStream(ctx, "Flood")
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the window to fill", func() bool { return sent.Load() >= clientWindow })
		time.Sleep(100 * time.Millisecond)
		if got := sent.Load(); got != clientWindow {
			t.Fatalf("the server wrote %d bytes to a stream nobody reads, want the client's window, %d", got, clientWindow)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-serverErr; handler.CodeOf(err) != proto.CodeCanceled {
			t.Fatalf("the handler's blocked Write returned %v, want Canceled", err)
		}
	})
}

// TestStreamWindowEnforced: a peer that sends more than it was granted
// breaks the protocol and is cut off with a GoAway saying so.
func TestStreamWindowEnforced(t *testing.T) {
	var held atomic.Int64
	s := start(t, streamRoutes(&held), reactor.Options{StreamWindow: 1000})
	r := dialRaw(t, s)
	r.send(proto.AppendStreamOpen(nil, 1, "Hold", proto.CodecRaw, 0, nil, 1<<20))
	f, err := r.next()
	if err != nil || f.Kind != proto.KindStreamCredit || f.StreamWindow() != 1000 {
		t.Fatalf("first frame %v %d (%v), want StreamCredit 1000", f.Kind, f.StreamWindow(), err)
	}
	r.send(proto.AppendStreamData(nil, 1, make([]byte, 600)))
	r.send(proto.AppendStreamData(nil, 1, make([]byte, 401)))
	f, err = r.next()
	if err != nil || f.Kind != proto.KindGoAway {
		t.Fatalf("got %v (%v), want GoAway", f.Kind, err)
	}
	if _, code, msg := f.GoAwayBody(); code != proto.CodeInternal || !bytes.Contains(msg, []byte("beyond the window")) {
		t.Fatalf("GoAway %v %q", code, msg)
	}
	waitFor(t, "the handler to end with the connection", func() bool { return held.Load() == 0 })
}

// TestStreamRawRules: what a raw peer sees for refusals and stray frames.
func TestStreamRawRules(t *testing.T) {
	s := start(t, streamRoutes(nil), reactor.Options{})
	r := dialRaw(t, s)
	r.send(proto.AppendStreamOpen(nil, 1, "No/Such", proto.CodecRaw, 0, nil, 100))
	f, _ := r.next()
	if code, msg := f.ErrorBody(); f.Kind != proto.KindStreamReset || f.Flags != proto.FlagUnprocessed || code != proto.CodeNotFound {
		t.Fatalf("got %v flags %v code %v %q, want StreamReset Unprocessed NotFound", f.Kind, f.Flags, code, msg)
	}
	// A Request to a stream route is a request to no route.
	r.send(proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 9}, "Echo", nil, nil))
	if f, _ = r.next(); f.Kind != proto.KindError {
		t.Fatalf("got %v, want Error", f.Kind)
	} else if code, _ := f.ErrorBody(); code != proto.CodeNotFound {
		t.Fatalf("code %v, want NotFound", code)
	}
	// Frames of unknown streams are dropped; the connection goes on.
	r.send(proto.AppendStreamData(nil, 77, []byte("late")))
	r.send(proto.AppendStreamCredit(nil, 77, 5))
	r.send(proto.AppendStreamEnd(nil, 77))
	r.send(proto.AppendStreamReset(nil, 77, 0, proto.CodeCanceled, ""))
	// An echo, by the frames: credit first, then the bytes, the end and
	// a code-0 reset.
	r.send(proto.AppendStreamOpen(nil, 3, "Echo", proto.CodecRaw, 0, nil, 100))
	if f, _ = r.next(); f.Kind != proto.KindStreamCredit || f.ID != 3 {
		t.Fatalf("got %v id %d, want StreamCredit 3", f.Kind, f.ID)
	}
	r.send(proto.AppendStreamData(nil, 3, []byte("hello")))
	r.send(proto.AppendStreamEnd(nil, 3))
	var kinds []proto.Kind
	var data []byte
	for len(kinds) == 0 || kinds[len(kinds)-1] != proto.KindStreamReset {
		f, err := r.next()
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, f.Kind)
		if f.Kind == proto.KindStreamData {
			data = append(data, f.Payload...)
		}
		if f.Kind == proto.KindStreamReset {
			if code, _ := f.ErrorBody(); code != proto.CodeOK {
				t.Fatalf("final reset code %v, want 0", code)
			}
		}
	}
	if string(data) != "hello" || kinds[len(kinds)-2] != proto.KindStreamEnd {
		t.Fatalf("echo frames %v, data %q", kinds, data)
	}
	// An even id from the client breaks the protocol.
	r.send(proto.AppendStreamOpen(nil, 4, "Echo", proto.CodecRaw, 0, nil, 100))
	if f, _ = r.next(); f.Kind != proto.KindGoAway {
		t.Fatalf("got %v, want GoAway", f.Kind)
	}
}

// TestStreamCancel: each side ends a stream early, and the other side
// sees it with the right code.
func TestStreamCancel(t *testing.T) {
	var held atomic.Int64
	s := start(t, streamRoutes(&held), reactor.Options{})
	c := dial(t, s, client.Options{})

	t.Run("the client cancels its context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctxT(t))
		st, err := c.OpenStream(ctx, "Hold")
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the handler to start", func() bool { return held.Load() == 1 })
		cancel() // no Read or Write waits: the watch resets the stream
		waitFor(t, "the handler's context to end", func() bool { return held.Load() == 0 })
		if _, err := st.Read(make([]byte, 1)); handler.CodeOf(err) != proto.CodeCanceled {
			t.Fatalf("Read after the cancel: %v, want Canceled", err)
		}
	})
	t.Run("the client closes early", func(t *testing.T) {
		st, err := c.OpenStream(ctxT(t), "Hold")
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the handler to start", func() bool { return held.Load() == 1 })
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the handler's context to end", func() bool { return held.Load() == 0 })
	})
	t.Run("the handler fails", func(t *testing.T) {
		st, err := c.OpenStream(ctxT(t), "Fail")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Write([]byte{byte(proto.CodeAborted)}); err != nil {
			t.Fatal(err)
		}
		_, err = st.Read(make([]byte, 1))
		var he *handler.Error
		if !errors.As(err, &he) || he.Code != proto.CodeAborted || he.Message != "failed as asked" || he.Unprocessed {
			t.Fatalf("Read: %v, want the handler's Aborted", err)
		}
		if err := st.Close(); handler.CodeOf(err) != proto.CodeAborted {
			t.Fatalf("Close: %v, want the handler's error", err)
		}
	})
	t.Run("a deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctxT(t), 200*time.Millisecond)
		defer cancel()
		st, err := c.OpenStream(ctx, "Hold")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Read(make([]byte, 1)); handler.CodeOf(err) != proto.CodeDeadlineExceeded {
			t.Fatalf("Read: %v, want DeadlineExceeded", err)
		}
		waitFor(t, "the handler's context to end", func() bool { return held.Load() == 0 })
	})
	t.Run("no such stream route", func(t *testing.T) {
		st, err := c.OpenStream(ctxT(t), "No/Such")
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.Write([]byte("x"))
		if !errors.Is(err, handler.ErrNotFound) || !handler.IsUnprocessed(err) {
			t.Fatalf("Write: %v, want an Unprocessed NotFound", err)
		}
	})
}

// TestStreamConnectionLoss: a connection that closes ends its streams on
// both sides with Unavailable, and the handlers return.
func TestStreamConnectionLoss(t *testing.T) {
	var held atomic.Int64
	s := start(t, streamRoutes(&held), reactor.Options{})
	c := dial(t, s, client.Options{})
	st, err := c.OpenStream(ctxT(t), "Hold")
	if err != nil {
		t.Fatal(err)
	}
	echo, err := c.OpenStream(ctxT(t), "Echo")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := echo.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(echo, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the handler to start", func() bool { return held.Load() == 1 })
	c.Close()
	waitFor(t, "the handler to see the loss", func() bool { return held.Load() == 0 })
	for _, x := range []handler.Stream{st, echo} {
		if _, err := x.Read(make([]byte, 1)); handler.CodeOf(err) != proto.CodeUnavailable {
			t.Fatalf("Read after the loss: %v, want Unavailable", err)
		}
	}
}

// TestStreamShutdown: a draining server refuses new streams (Unprocessed
// Unavailable), lets the open one finish, then stops; a stream still open
// when the drain's time is up is ended and its handler returns.
func TestStreamShutdown(t *testing.T) {
	var held atomic.Int64
	reg := streamRoutes(&held)
	s := newServer(t, reg, reactor.Options{})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	c := dial(t, s, client.Options{})
	st, err := c.OpenStream(ctxT(t), "File/Sum")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write([]byte("part one, ")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(ctxT(t)) }()
	// A stream opened before the drain begins is served, and would hold
	// the drain open: the late ones below come after it.
	waitFor(t, "the drain to begin", func() bool { return s.Stats().Draining })
	waitFor(t, "the drain", func() bool {
		late, err := c.OpenStream(ctxT(t), "Echo")
		if err != nil {
			return handler.IsUnprocessed(err)
		}
		_, err = late.Write([]byte("x"))
		return handler.CodeOf(err) == proto.CodeUnavailable && handler.IsUnprocessed(err)
	})
	if _, err := st.Write([]byte("part two")); err != nil {
		t.Fatal(err)
	}
	st.CloseSend()
	got, err := readAll(st)
	if err != nil || string(got) != sumOf(bytes.NewReader([]byte("part one, part two"))) {
		t.Fatalf("the stream open at the drain: %q, %v", got, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	s2 := newServer(t, reg, reactor.Options{})
	if err := s2.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	c2 := dial(t, s2, client.Options{})
	hold, err := c2.OpenStream(ctxT(t), "Hold")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the handler to start", func() bool { return held.Load() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := s2.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with a stream that never ends: %v, want its deadline", err)
	}
	waitFor(t, "the handler to end", func() bool { return held.Load() == 0 })
	if _, err := hold.Read(make([]byte, 1)); err == nil || err == io.EOF {
		t.Fatalf("Read on a stream of a stopped server: %v", err)
	}
}

// TestStreamsManyAtOnce: many streams on one connection, each through
// windows smaller than its data, beside ordinary calls on the same
// connection; every byte comes back where it belongs.
func TestStreamsManyAtOnce(t *testing.T) {
	s := start(t, streamRoutes(nil), reactor.Options{StreamWindow: 16 << 10})
	c := dial(t, s, client.Options{Conns: 1, StreamWindow: 16 << 10})
	const streams, size = 40, 200 << 10
	var wg sync.WaitGroup
	errs := make(chan error, streams+4)
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := c.OpenStream(ctxT(t), "Echo")
			if err != nil {
				errs <- err
				return
			}
			go func() {
				_, _ = io.Copy(st, io.LimitReader(newSeeded(byte(i)), size))
				_ = st.CloseSend()
			}()
			if got := sumOf(st); got != sumOf(io.LimitReader(newSeeded(byte(i)), size)) {
				errs <- fmt.Errorf("stream %d: wrong bytes back", i)
			}
			if err := st.Close(); err != nil {
				errs <- fmt.Errorf("stream %d: %v", i, err)
			}
		}()
	}
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				msg := fmt.Appendf(nil, "call %d.%d", i, j)
				got, err := c.CallRaw(ctxT(t), "Bytes/Echo", msg, nil)
				if err != nil || !bytes.Equal(got, msg) {
					errs <- fmt.Errorf("call beside the streams: %q, %v", got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestStreamMaxStreams: past MaxStreams, a new stream is refused with an
// Unprocessed ResourceExhausted; once one ends, there is room again.
func TestStreamMaxStreams(t *testing.T) {
	var held atomic.Int64
	s := start(t, streamRoutes(&held), reactor.Options{MaxStreams: 2})
	c := dial(t, s, client.Options{Conns: 1})
	var open []handler.Stream
	for range 2 {
		st, err := c.OpenStream(ctxT(t), "Hold")
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, st)
	}
	waitFor(t, "two handlers", func() bool { return held.Load() == 2 })
	third, _ := c.OpenStream(ctxT(t), "Hold")
	if _, err := third.Read(make([]byte, 1)); handler.CodeOf(err) != proto.CodeResourceExhausted || !handler.IsUnprocessed(err) {
		t.Fatalf("third stream: %v, want an Unprocessed ResourceExhausted", err)
	}
	open[0].Close()
	waitFor(t, "a handler to end", func() bool { return held.Load() == 1 })
	fourth, _ := c.OpenStream(ctxT(t), "Hold")
	waitFor(t, "the fourth stream's handler", func() bool { return held.Load() == 2 })
	fourth.Close()
	open[1].Close()
}

// TestStreamFromServer: a server handler opens streams to its client's
// stream routes through its Peer, both ways, while the client's call
// waits.
func TestStreamFromServer(t *testing.T) {
	clientReg := handler.NewRegistry()
	clientReg.HandleStream("Client/Sum", func(ctx context.Context, s handler.Stream) error {
		_, err := s.Write([]byte(sumOf(s)))
		return err
	})
	reg := handler.NewRegistry()
	reg.HandleFunc("Ask/Client", func(ctx context.Context, req, reply []byte) ([]byte, error) {
		opener, ok := handler.CallFrom(ctx).Peer.(handler.StreamOpener)
		if !ok {
			return reply, errors.New("the peer opens no streams")
		}
		st, err := opener.OpenStream(ctx, "Client/Sum")
		if err != nil {
			return reply, err
		}
		if _, err := io.Copy(st, io.LimitReader(newSeeded(9), 1<<20)); err != nil {
			return reply, err
		}
		st.CloseSend()
		got, err := io.ReadAll(st)
		if err != nil {
			return reply, err
		}
		if err := st.Close(); err != nil {
			return reply, err
		}
		return append(reply, got...), nil
	}, handler.Blocking())
	s := start(t, reg, reactor.Options{})
	c := dial(t, s, client.Options{Handler: clientReg})
	got, err := c.CallRaw(ctxT(t), "Ask/Client", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := sumOf(io.LimitReader(newSeeded(9), 1<<20)); string(got) != want {
		t.Fatalf("client's sum through the server %s, want %s", got, want)
	}
	// A stream route the client lacks: refused, Unprocessed.
	reg.HandleFunc("Ask/Missing", func(ctx context.Context, req, reply []byte) ([]byte, error) {
		st, err := handler.CallFrom(ctx).Peer.(handler.StreamOpener).OpenStream(ctx, "Client/None")
		if err != nil {
			return reply, err
		}
		_, err = st.Read(make([]byte, 1))
		return reply, err
	}, handler.Blocking())
	if _, err := c.CallRaw(ctxT(t), "Ask/Missing", nil, nil); !errors.Is(err, handler.ErrNotFound) {
		t.Fatalf("stream to a missing client route: %v, want NotFound", err)
	}
	// An inline handler may not: the stream's Read and Write would block
	// its event loop.
	reg.HandleFunc("Ask/Inline", func(ctx context.Context, req, reply []byte) ([]byte, error) {
		_, err := handler.CallFrom(ctx).Peer.(handler.StreamOpener).OpenStream(ctx, "Client/Sum")
		return reply, err
	})
	if _, err := c.CallRaw(ctxT(t), "Ask/Inline", nil, nil); handler.CodeOf(err) != proto.CodeFailedPrecondition {
		t.Fatalf("a stream from an inline handler: %v, want FailedPrecondition", err)
	}
}

// TestStreamMiddleware: the registry's middleware wraps streams as it
// wraps calls: it sees the stream's route and metadata, and a refusal
// (authorization, say) reaches the opener as an Unprocessed error
// before the handler runs.
func TestStreamMiddleware(t *testing.T) {
	var ran atomic.Int64
	reg := handler.NewRegistry()
	reg.HandleStream("Secret/Dump", func(ctx context.Context, s handler.Stream) error {
		ran.Add(1)
		_, err := s.Write([]byte("the secret"))
		return err
	})
	reg.Use(func(next handler.Handler) handler.Handler {
		return handler.HandlerFunc(func(ctx context.Context, req, reply []byte) ([]byte, error) {
			call := handler.CallFrom(ctx)
			if tok, _ := call.Metadata.Get("token"); call.Route == "Secret/Dump" && string(tok) != "open sesame" {
				return reply, &handler.Error{Code: proto.CodePermissionDenied, Message: "no", Unprocessed: true}
			}
			return next.ServeRPC(ctx, req, reply)
		})
	})
	s := start(t, reg, reactor.Options{})
	c := dial(t, s, client.Options{})

	st, err := c.OpenStream(ctxT(t), "Secret/Dump")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Read(make([]byte, 1)); !errors.Is(err, handler.ErrPermissionDenied) || !handler.IsUnprocessed(err) {
		t.Fatalf("Read: %v, want an Unprocessed PermissionDenied", err)
	}
	ctx := client.WithMetadata(ctxT(t), "token", "open sesame")
	st, err = c.OpenStream(ctx, "Secret/Dump")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(st); err != nil || string(got) != "the secret" {
		t.Fatalf("with the token: %q, %v", got, err)
	}
	if ran.Load() != 1 {
		t.Fatalf("the handler ran %d times, want once", ran.Load())
	}
}
