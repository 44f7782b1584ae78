package readbuf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
)

// TestReadBufStream: a random mix of Peek, Discard and Read gives the
// source's bytes in order, each Peek the next n of them (or fewer with the
// error that stopped it), over sources that return a byte at a time, half
// of what is asked, a timeout once, or data with the error.
func TestReadBufStream(t *testing.T) {
	data := make([]byte, 300<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	sources := map[string]func() io.Reader{
		"plain":    func() io.Reader { return bytes.NewReader(data) },
		"one byte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(data)) },
		"half":     func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) },
		"timeout":  func() io.Reader { return iotest.TimeoutReader(bytes.NewReader(data)) },
		"data err": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(data)) },
	}
	for name, src := range sources {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			b := new(Buf)
			b.Init(src())
			off, timeouts := 0, 0
			for step := 0; off < len(data); step++ {
				n := rng.IntN(3 << 10)
				if rng.IntN(10) == 0 {
					n = rng.IntN(MaxSize + 1)
				}
				var got []byte
				var err error
				switch rng.IntN(3) {
				case 0:
					got, err = b.Peek(n)
					if err == nil && len(got) != n {
						t.Fatalf("step %d: Peek(%d) gave %d bytes and no error", step, n, len(got))
					}
					if !bytes.Equal(got, data[off:off+len(got)]) {
						t.Fatalf("step %d: Peek(%d) gave the wrong bytes at %d", step, n, off)
					}
				case 1:
					var m int
					m, err = b.Discard(n)
					if err == nil && m != n {
						t.Fatalf("step %d: Discard(%d) = %d and no error", step, n, m)
					}
					off += m
				case 2:
					p := make([]byte, n)
					var m int
					m, err = b.Read(p)
					if !bytes.Equal(p[:m], data[off:off+m]) {
						t.Fatalf("step %d: Read gave the wrong bytes at %d", step, off)
					}
					off += m
				}
				switch {
				case err == nil:
				case errors.Is(err, iotest.ErrTimeout):
					timeouts++
				case err == io.EOF && (off == len(data) || off+n > len(data)):
				default:
					t.Fatalf("step %d: %v at %d of %d", step, err, off, len(data))
				}
				if b.Buffered() > len(data)-off {
					t.Fatalf("step %d: %d buffered, %d left", step, b.Buffered(), len(data)-off)
				}
			}
			if name == "timeout" && timeouts != 1 {
				t.Errorf("%d timeouts seen, want the one", timeouts)
			}
		})
	}
}

// TestReadBufSize: the buffer grows to MaxSize while reads fill it or a
// Peek needs the room, and shrinks back to MinSize once its reads stay
// small.
func TestReadBufSize(t *testing.T) {
	big := bytes.NewReader(make([]byte, 1<<20))
	b := new(Buf)
	b.Init(big)
	if len(b.buf) != MinSize {
		t.Fatalf("starts at %d, want %d", len(b.buf), MinSize)
	}
	if _, err := b.Peek(40 << 10); err != nil || len(b.buf) < 40<<10 {
		t.Fatalf("after a 40 KiB Peek: %d bytes, %v", len(b.buf), err)
	}
	for range 8 {
		if _, err := b.Discard(len(b.buf)); err != nil {
			t.Fatal(err)
		}
	}
	if len(b.buf) != MaxSize {
		t.Fatalf("after full reads: %d bytes, want %d", len(b.buf), MaxSize)
	}
	if _, err := b.Discard(b.Buffered()); err != nil {
		t.Fatal(err)
	}
	b.src = iotest.OneByteReader(bytes.NewReader(make([]byte, 1<<20)))
	for range 20 * shrinkAfter {
		if _, err := b.Discard(1); err != nil {
			t.Fatal(err)
		}
	}
	if len(b.buf) != MinSize {
		t.Fatalf("after small reads: %d bytes, want %d", len(b.buf), MinSize)
	}
}

// TestFillStream: the server's way of reading (Fill once, take the whole
// "frames" in Bytes, Discard them, leave a partial one for the next Fill)
// gives the carry and then the source's bytes in order, whatever the reads
// return, and the buffer never shrinks below its floor.
func TestFillStream(t *testing.T) {
	data := make([]byte, 300<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	carry, rest := data[:5000], data[5000:]
	sources := map[string]func() io.Reader{
		"plain":    func() io.Reader { return bytes.NewReader(rest) },
		"one byte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(rest)) },
		"half":     func() io.Reader { return iotest.HalfReader(bytes.NewReader(rest)) },
		"timeout":  func() io.Reader { return iotest.TimeoutReader(bytes.NewReader(rest)) },
	}
	for _, floor := range []int{MinSize, MaxSize} {
		for name, src := range sources {
			t.Run(fmt.Sprintf("%s floor %d", name, floor), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(3, 4))
				b := NewWith(src(), floor, carry)
				if got := b.Bytes(); !bytes.Equal(got, carry) {
					t.Fatalf("holds %d bytes first, want the carry's %d", len(got), len(carry))
				}
				off, timeouts := 0, 0
				for step := 0; off < len(data); step++ {
					if step > 1<<20 {
						t.Fatalf("%d steps, %d of %d bytes read", step, off, len(data))
					}
					// A frame of up to MaxSize: take it if it is whole.
					if frame := 1 + rng.IntN(MaxSize); b.Buffered() >= min(frame, len(data)-off) {
						k := min(frame, len(data)-off)
						if !bytes.Equal(b.Bytes()[:k], data[off:off+k]) {
							t.Fatalf("step %d: the wrong bytes at %d", step, off)
						}
						if m, err := b.Discard(k); m != k || err != nil {
							t.Fatalf("step %d: Discard(%d) of %d buffered = %d, %v", step, k, b.Buffered()+m, m, err)
						}
						off += k
						continue
					}
					n, err := b.Fill()
					switch {
					case err == nil:
					case errors.Is(err, iotest.ErrTimeout):
						timeouts++
					case err == io.EOF && n == 0 && off+b.Buffered() == len(data):
					default:
						t.Fatalf("step %d: Fill = %d, %v at %d of %d", step, n, err, off, len(data))
					}
					if len(b.buf) < floor {
						t.Fatalf("step %d: the buffer is %d bytes, under its floor of %d", step, len(b.buf), floor)
					}
				}
				if name == "timeout" && timeouts != 1 {
					t.Errorf("%d timeouts seen, want the one", timeouts)
				}
				if n, err := b.Fill(); n != 0 || err != io.EOF {
					t.Errorf("Fill past the end = %d, %v; want 0, EOF each time", n, err)
				}
			})
		}
	}
}

// TestFillErrorsAsTheyCome: Fill returns each error of the source's, a
// deadline's included, as the read returns it, and keeps none: the next
// Fill reads again (the server's poke sets a deadline in the past to
// interrupt a read, and then reads on).
func TestFillErrorsAsTheyCome(t *testing.T) {
	src := &script{reads: []read{{"ab", nil}, {"", iotest.ErrTimeout}, {"cd", iotest.ErrTimeout}, {"ef", nil}}}
	b := NewWith(src, 0, nil)
	for i, want := range []struct {
		n   int
		err error
	}{{2, nil}, {0, iotest.ErrTimeout}, {2, iotest.ErrTimeout}, {2, nil}, {0, io.EOF}, {0, io.EOF}} {
		if n, err := b.Fill(); n != want.n || err != want.err {
			t.Fatalf("Fill %d = %d, %v; want %d, %v", i+1, n, err, want.n, want.err)
		}
	}
	if got := string(b.Bytes()); got != "abcdef" {
		t.Fatalf("buffered %q, want %q", got, "abcdef")
	}
}

// TestFillFull: a full buffer is grown before a Fill, so a frame larger
// than it can be read in; one of MaxSize, full, with nothing consumed, is
// an error, not a read of nothing.
func TestFillFull(t *testing.T) {
	b := NewWith(bytes.NewReader(make([]byte, 1<<20)), MinSize, nil)
	for b.Buffered() < MaxSize {
		before := b.Buffered()
		if n, err := b.Fill(); n == 0 || err != nil {
			t.Fatalf("Fill with %d buffered in %d = %d, %v", before, len(b.buf), n, err)
		}
	}
	if n, err := b.Fill(); n != 0 || err == nil {
		t.Fatalf("Fill with %d bytes buffered of %d = %d, %v; want an error", b.Buffered(), len(b.buf), n, err)
	}
	if _, err := b.Discard(1); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Fill(); n != 1 || err != nil {
		t.Fatalf("Fill after a byte is consumed = %d, %v; want the byte's room filled", n, err)
	}

	// A carry that fills its buffer, a frame's first part: the rest is
	// read into a buffer grown for it.
	b = NewWith(bytes.NewReader(make([]byte, 1<<20)), MinSize, make([]byte, MinSize+100))
	if n, err := b.Fill(); n == 0 || err != nil {
		t.Fatalf("Fill with a carry that fills the buffer = %d, %v; want bytes read", n, err)
	}
}

// TestCarryLargerThanMax: a carry past MaxSize is held whole, and the
// buffer shrinks back to its floor once its reads stay small.
func TestCarryLargerThanMax(t *testing.T) {
	carry := bytes.Repeat([]byte{7}, 3*MaxSize/2)
	b := NewWith(iotest.OneByteReader(bytes.NewReader(make([]byte, 1<<20))), MinSize, carry)
	if !bytes.Equal(b.Bytes(), carry) {
		t.Fatalf("holds %d bytes, want the carry's %d", b.Buffered(), len(carry))
	}
	if _, err := b.Discard(len(carry)); err != nil {
		t.Fatal(err)
	}
	for range 20 * shrinkAfter {
		if _, err := b.Fill(); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Discard(b.Buffered()); err != nil {
			t.Fatal(err)
		}
	}
	if len(b.buf) != MinSize {
		t.Fatalf("after small reads: %d bytes, want %d", len(b.buf), MinSize)
	}
}

// script is a source that returns its reads in order, then io.EOF.
type script struct{ reads []read }

type read struct {
	data string
	err  error
}

func (s *script) Read(p []byte) (int, error) {
	if len(s.reads) == 0 {
		return 0, io.EOF
	}
	r := s.reads[0]
	s.reads = s.reads[1:]
	return copy(p, r.data), r.err
}
