package stream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/internal/leaktest"
	"github.com/rpcd/rpcd/proto"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// noRoom is OnData's room for a payload that is not compressed: unused.
const noRoom = 0

// fakeLink records what a stream sends.
type fakeLink struct {
	mu      sync.Mutex
	data    int      // payload bytes sent in StreamData
	sent    [][]byte // those payloads, if keep
	zips    []proto.Compression
	keep    bool
	frames  []proto.Frame
	forgot  int
	sendErr error
}

func (l *fakeLink) SendData(_ context.Context, _ uint32, data []byte, zip proto.Compression) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.data += len(data)
	if l.keep {
		l.sent = append(l.sent, append([]byte(nil), data...))
		l.zips = append(l.zips, zip)
	}
	return l.sendErr
}

func (l *fakeLink) SendControl(frame []byte) error {
	f, _, err := proto.Decode(frame, nil)
	if err != nil {
		panic(err)
	}
	f.Payload = append([]byte(nil), f.Payload...)
	l.mu.Lock()
	l.frames = append(l.frames, f)
	l.mu.Unlock()
	return nil
}

func (l *fakeLink) Forget(*Stream) { l.mu.Lock(); l.forgot++; l.mu.Unlock() }

func (l *fakeLink) kinds() []proto.Kind {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ks []proto.Kind
	for _, f := range l.frames {
		ks = append(ks, f.Kind)
	}
	return ks
}

// TestReceiveWindow: the receive buffer never holds more than the window,
// data beyond it is a protocol error, and reading grants credit back in
// quarters of the window.
func TestReceiveWindow(t *testing.T) {
	const window = 4096
	l := &fakeLink{}
	s := New(1, true, l, context.Background(), window, 0)
	if err := s.OnData(make([]byte, window), proto.CompressionNone, noRoom); err != nil {
		t.Fatal(err)
	}
	if err := s.OnData([]byte{1}, proto.CompressionNone, noRoom); !errors.Is(err, proto.ErrProtocol) {
		t.Fatalf("data past the window: %v, want a protocol error", err)
	}
	buf := make([]byte, window/4-1)
	if _, err := io.ReadFull(s, buf); err != nil {
		t.Fatal(err)
	}
	if len(l.frames) != 0 {
		t.Fatalf("credit granted after %d bytes, before a quarter window", len(buf))
	}
	if _, err := io.ReadFull(s, buf[:1]); err != nil {
		t.Fatal(err)
	}
	if len(l.frames) != 1 || l.frames[0].Kind != proto.KindStreamCredit || l.frames[0].StreamWindow() != window/4 {
		t.Fatalf("frames %+v, want one StreamCredit of %d", l.frames, window/4)
	}
	// A long exchange through the window: the buffer stays within it.
	total := 0
	for i := range 1000 {
		n := 1 + i*37%(window/2)
		if n > s.granted {
			n = s.granted
		}
		if err := s.OnData(make([]byte, n), proto.CompressionNone, noRoom); err != nil {
			t.Fatal(err)
		}
		r, _ := s.Read(make([]byte, 1+i*53%window))
		total += r
		if len(s.buf.b) > window {
			t.Fatalf("buffer of %d bytes, past the window %d", len(s.buf.b), window)
		}
		if s.granted+s.buf.n+s.unacked != window {
			t.Fatalf("granted %d + unread %d + unacked %d != window %d", s.granted, s.buf.n, s.unacked, window)
		}
	}
	if total == 0 {
		t.Fatal("nothing read")
	}
}

// TestProtocolErrors: frames a peer must not send.
func TestProtocolErrors(t *testing.T) {
	s := New(1, true, &fakeLink{}, context.Background(), 100, 0)
	if err := s.OnEnd(); err != nil {
		t.Fatal(err)
	}
	if err := s.OnEnd(); !errors.Is(err, proto.ErrProtocol) {
		t.Fatalf("a second end: %v", err)
	}
	if err := s.OnData([]byte{1}, proto.CompressionNone, noRoom); !errors.Is(err, proto.ErrProtocol) {
		t.Fatalf("data after the end: %v", err)
	}
	if err := s.OnCredit(proto.MaxStreamWindow); err != nil {
		t.Fatal(err)
	}
	if err := s.OnCredit(1); !errors.Is(err, proto.ErrProtocol) {
		t.Fatalf("credit past 2^31-1: %v", err)
	}
}

// TestWriteSpendsCredit: Write sends no more than the credit, in chunks of
// MaxChunk at most, and waits for more.
func TestWriteSpendsCredit(t *testing.T) {
	l := &fakeLink{}
	s := New(1, true, l, context.Background(), 100, 0)
	if err := s.OnCredit(MaxChunk + 10); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Write(make([]byte, MaxChunk+20))
		done <- err
	}()
	for start := time.Now(); ; runtime.Gosched() {
		l.mu.Lock()
		d := l.data
		l.mu.Unlock()
		if d == MaxChunk+10 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("Write sent %d bytes of the %d it had credit for", d, MaxChunk+10)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("Write returned (%v) with 10 bytes it had no credit for", err)
	default:
	}
	if err := s.OnCredit(10); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if l.data != MaxChunk+20 {
		t.Fatalf("sent %d bytes", l.data)
	}
}

// TestEnds: a clean end keeps what arrived readable; a reset with a code
// drops it and fails both ways; Finish sends the handler's outcome.
func TestEnds(t *testing.T) {
	l := &fakeLink{}
	s := New(1, true, l, context.Background(), 100, 10)
	s.OnData([]byte("abc"), proto.CompressionNone, noRoom)
	s.OnEnd()
	s.OnReset(proto.CodeOK, nil, false)
	if b, err := io.ReadAll(s); err != nil || string(b) != "abc" {
		t.Fatalf("after a clean end: %q, %v", b, err)
	}
	if _, err := s.Write([]byte("x")); err != io.EOF {
		t.Fatalf("Write after the handler returned: %v, want io.EOF", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close after a clean end: %v", err)
	}

	s = New(3, true, l, context.Background(), 100, 10)
	s.OnData([]byte("abc"), proto.CompressionNone, noRoom)
	s.OnReset(proto.CodeDataLoss, []byte("gone"), false)
	if _, err := s.Read(make([]byte, 10)); handler.CodeOf(err) != proto.CodeDataLoss {
		t.Fatalf("Read after a reset: %v, want DataLoss", err)
	}
	if _, err := s.Write([]byte("x")); handler.CodeOf(err) != proto.CodeDataLoss {
		t.Fatalf("Write after a reset: %v, want DataLoss", err)
	}

	l = &fakeLink{}
	a := New(5, false, l, context.Background(), 100, 10)
	a.Finish(nil)
	if ks := l.kinds(); len(ks) != 2 || ks[0] != proto.KindStreamEnd || ks[1] != proto.KindStreamReset {
		t.Fatalf("Finish(nil) sent %v, want StreamEnd, StreamReset", ks)
	}
	l = &fakeLink{}
	a = New(7, false, l, context.Background(), 100, 10)
	a.Finish(&handler.Error{Code: proto.CodeNotFound, Message: "x", Unprocessed: true})
	if len(l.frames) != 1 || l.frames[0].Flags != proto.FlagUnprocessed {
		t.Fatalf("Finish(err) sent %+v, want one Unprocessed StreamReset", l.frames)
	}
	if code, _ := l.frames[0].ErrorBody(); code != proto.CodeNotFound || l.forgot != 1 {
		t.Fatalf("code %v, forgot %d", code, l.forgot)
	}
}

// TestOpenerContext: an opener's context that ends resets the stream at
// once, whether or not anything waits on it.
func TestOpenerContext(t *testing.T) {
	l := &fakeLink{}
	ctx, cancel := context.WithCancel(context.Background())
	s := New(1, true, l, ctx, 100, 0)
	s.Watch()
	cancel()
	<-s.Done()
	for start := time.Now(); len(l.kinds()) == 0 && time.Since(start) < 10*time.Second; {
		runtime.Gosched() // the reset goes out just after the stream is marked finished
	}
	if ks := l.kinds(); len(ks) != 1 || ks[0] != proto.KindStreamReset {
		t.Fatalf("sent %v, want a StreamReset", ks)
	}
	if code, _ := l.frames[0].ErrorBody(); code != proto.CodeCanceled {
		t.Fatalf("reset code %v, want Canceled", code)
	}
	if _, err := s.Read(make([]byte, 1)); handler.CodeOf(err) != proto.CodeCanceled {
		t.Fatalf("Read: %v", err)
	}
}

// TestCompressedData: a compressed StreamData is expanded, and what it
// expands to counts against the window; past the window, or past the
// frame's room, it is a protocol error; one that does not expand resets
// the stream with InvalidArgument and leaves the connection alone. Write
// compresses in what SetCompression names, only chunks of its minimum or
// more that shrink, and spends credit on the bytes as they are.
func TestCompressedData(t *testing.T) {
	const window = 64 << 10
	text := bytes.Repeat([]byte("a stream of log lines, much alike; "), 600) // 21,000 bytes
	for _, zip := range compression.Supported() {
		t.Run(zip.String(), func(t *testing.T) {
			packed := compression.Append(nil, text, zip)
			l := &fakeLink{}
			s := New(1, true, l, context.Background(), window, 0)
			if err := s.OnData(packed, zip, 1<<20); err != nil {
				t.Fatal(err)
			}
			if s.granted != window-len(text) {
				t.Fatalf("granted %d after %d bytes expanded, want %d", s.granted, len(text), window-len(text))
			}
			got := make([]byte, len(text))
			if _, err := io.ReadFull(s, got); err != nil || !bytes.Equal(got, text) {
				t.Fatalf("read %d bytes, equal %v, err %v", len(got), bytes.Equal(got, text), err)
			}

			// 21,000 bytes expanded against a window with less left.
			s = New(3, true, &fakeLink{}, context.Background(), window, 0)
			if err := s.OnData(make([]byte, window-len(text)+1), proto.CompressionNone, noRoom); err != nil {
				t.Fatal(err)
			}
			if err := s.OnData(packed, zip, 1<<20); !errors.Is(err, proto.ErrProtocol) {
				t.Fatalf("past the window: %v, want a protocol error", err)
			}
			s = New(5, true, &fakeLink{}, context.Background(), window, 0)
			if err := s.OnData(packed, zip, len(text)-1); !errors.Is(err, proto.ErrProtocol) {
				t.Fatalf("past the frame's room: %v, want a protocol error", err)
			}
			if err := s.OnData(packed, zip, len(text)); err != nil {
				t.Fatalf("exactly the frame's room: %v", err)
			}

			// Not data of its compression: the stream is reset, no more.
			l = &fakeLink{}
			s = New(7, true, l, context.Background(), window, 0)
			if err := s.OnData([]byte("not compressed at all"), zip, 1<<20); err != nil {
				t.Fatalf("bad data: %v, want the stream reset and no error for the connection", err)
			}
			if len(l.frames) != 1 || l.frames[0].Kind != proto.KindStreamReset || l.forgot != 1 {
				t.Fatalf("sent %v, forgot %d; want one StreamReset", l.kinds(), l.forgot)
			}
			if code, _ := l.frames[0].ErrorBody(); code != proto.CodeInvalidArgument {
				t.Fatalf("reset with %v, want InvalidArgument", code)
			}
			if _, err := s.Read(make([]byte, 1)); handler.CodeOf(err) != proto.CodeInvalidArgument {
				t.Fatalf("Read after bad data: %v, want InvalidArgument", err)
			}

			// Writing: compressed chunks of the minimum or more that shrink.
			l = &fakeLink{keep: true}
			s = New(9, true, l, context.Background(), window, 0)
			s.SetCompression(zip, 1024)
			if err := s.OnCredit(2*MaxChunk + 2000); err != nil {
				t.Fatal(err)
			}
			noise := make([]byte, 1500) // random: does not shrink
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range noise {
				noise[i] = byte(rng.Uint32())
			}
			big := bytes.Repeat(text, 4)[:MaxChunk+2000] // two chunks, both compressed
			for _, p := range [][]byte{big, []byte("short"), noise} {
				if _, err := s.Write(p); err != nil {
					t.Fatal(err)
				}
			}
			want := []proto.Compression{zip, zip, proto.CompressionNone, proto.CompressionNone}
			if len(l.zips) != len(want) {
				t.Fatalf("sent %d StreamData (%v), want %d", len(l.zips), l.zips, len(want))
			}
			var sent []byte
			for i, p := range l.sent {
				if l.zips[i] != want[i] {
					t.Fatalf("StreamData %d in %v, want %v", i, l.zips[i], want[i])
				}
				if l.zips[i] != proto.CompressionNone {
					if p, _ = compression.Expand(nil, p, zip, MaxChunk); len(p) == 0 {
						t.Fatalf("StreamData %d does not expand", i)
					}
				}
				sent = append(sent, p...)
			}
			if !bytes.Equal(sent, slices.Concat(big, []byte("short"), noise)) {
				t.Fatal("what was sent does not expand to what was written")
			}
			if left := 2*MaxChunk + 2000 - len(sent); s.credit != left {
				t.Fatalf("credit %d, want %d: the bytes as written count", s.credit, left)
			}
		})
	}
}

// TestAwaitsFirstCredit: only an opener awaits a first StreamCredit, until
// one arrives; an acceptor's first credit came in the StreamOpen.
func TestAwaitsFirstCredit(t *testing.T) {
	o := New(1, true, &fakeLink{}, context.Background(), 100, 0)
	if !o.AwaitsFirstCredit() {
		t.Fatal("a new opener does not await its first StreamCredit")
	}
	if err := o.OnCredit(10); err != nil {
		t.Fatal(err)
	}
	if o.AwaitsFirstCredit() {
		t.Fatal("an opener still awaits its first StreamCredit after one came")
	}
	if a := New(2, false, &fakeLink{}, context.Background(), 100, 100); a.AwaitsFirstCredit() {
		t.Fatal("an acceptor awaits a first StreamCredit")
	}
}
