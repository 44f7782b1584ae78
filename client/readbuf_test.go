package client

import (
	"bytes"
	"errors"
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
			b := newReadBuf(src())
			off, timeouts := 0, 0
			for step := 0; off < len(data); step++ {
				n := rng.IntN(3 << 10)
				if rng.IntN(10) == 0 {
					n = rng.IntN(readBufSize + 1)
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

// TestReadBufSize: the buffer grows to readBufSize while reads fill it or a
// Peek needs the room, and shrinks back to readBufMin once its reads stay
// small.
func TestReadBufSize(t *testing.T) {
	big := bytes.NewReader(make([]byte, 1<<20))
	b := newReadBuf(big)
	if len(b.buf) != readBufMin {
		t.Fatalf("starts at %d, want %d", len(b.buf), readBufMin)
	}
	if _, err := b.Peek(40 << 10); err != nil || len(b.buf) < 40<<10 {
		t.Fatalf("after a 40 KiB Peek: %d bytes, %v", len(b.buf), err)
	}
	for range 8 {
		if _, err := b.Discard(len(b.buf)); err != nil {
			t.Fatal(err)
		}
	}
	if len(b.buf) != readBufSize {
		t.Fatalf("after full reads: %d bytes, want %d", len(b.buf), readBufSize)
	}
	if _, err := b.Discard(b.Buffered()); err != nil {
		t.Fatal(err)
	}
	b.src = iotest.OneByteReader(bytes.NewReader(make([]byte, 1<<20)))
	for range 20 * readBufShrink {
		if _, err := b.Discard(1); err != nil {
			t.Fatal(err)
		}
	}
	if len(b.buf) != readBufMin {
		t.Fatalf("after small reads: %d bytes, want %d", len(b.buf), readBufMin)
	}
}
