package client

import (
	"errors"
	"io"
)

// Read buffer sizes: a connection's buffer starts at readBufMin, grows,
// doubling, to readBufSize while reads fill it or a frame needs the room,
// and halves again once readBufShrink reads in a row used under a quarter
// of it. Frames up to readBufSize are read whole into it; larger ones
// stream past it (readFrame).
//
// Why not a bufio.Reader of readBufSize: its 64 KiB per connection were
// most of the 90 KiB a connection cost (a client of one connection in a
// soak of 10,000); a busy connection's buffer still grows to 64 KiB, where
// one read takes in the replies of a burst.
const (
	readBufMin    = 4 << 10
	readBufShrink = 64
)

// readBuf is bufio.Reader's Peek, Discard, Read and Buffered over src in a
// buffer that grows and shrinks (readBufMin). One goroutine at a time uses
// it: the holder of the connection's read token.
type readBuf struct {
	src   io.Reader
	buf   []byte
	r, w  int   // buf[r:w] is buffered
	err   error // from src, returned once the buffered bytes are used
	small int   // reads in a row that used under a quarter of buf
}

var errNegativeCount = errors.New("rpcd: negative count")

func newReadBuf(src io.Reader) *readBuf {
	return &readBuf{src: src, buf: make([]byte, readBufMin)}
}

// Size is the largest Peek: frames up to it are read whole.
func (b *readBuf) Size() int { return readBufSize }

// Buffered returns the number of bytes that can be read without reading
// src.
func (b *readBuf) Buffered() int { return b.w - b.r }

// readErr returns the error src gave, and forgets it.
func (b *readBuf) readErr() error {
	err := b.err
	b.err = nil
	return err
}

// fill reads src once into the buffer, first making room for need bytes in
// all: the buffered ones slid to its start, and the buffer grown if they
// do not fit or the last read filled it.
func (b *readBuf) fill(need int) {
	if b.r > 0 {
		copy(b.buf, b.buf[b.r:b.w])
		b.w -= b.r
		b.r = 0
	}
	if need > len(b.buf) {
		b.resize(min(max(need, 2*len(b.buf)), readBufSize))
	}
	for range 100 { // as bufio: a reader that keeps returning nothing is broken
		n, err := b.src.Read(b.buf[b.w:])
		if n < 0 {
			panic("rpcd: a reader returned a negative count")
		}
		room := len(b.buf) - b.w
		b.w += n
		b.fit(n, room)
		if err != nil {
			b.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	b.err = io.ErrNoProgress
}

// fit sizes the buffer after a read of n bytes into room: twice as large
// when the read filled it, half once reads have stayed small.
func (b *readBuf) fit(n, room int) {
	switch {
	case n == room && len(b.buf) < readBufSize:
		b.resize(min(2*len(b.buf), readBufSize))
		b.small = 0
	case len(b.buf) > readBufMin && n < len(b.buf)/4:
		if b.small++; b.small >= readBufShrink && b.w-b.r <= len(b.buf)/2 {
			b.resize(len(b.buf) / 2)
			b.small = 0
		}
	default:
		b.small = 0
	}
}

// resize moves the buffered bytes into a buffer of n bytes, n at least
// what is buffered.
func (b *readBuf) resize(n int) {
	nb := make([]byte, max(n, readBufMin))
	b.w = copy(nb, b.buf[b.r:b.w])
	b.r = 0
	b.buf = nb
}

// Peek returns the next n bytes without advancing, reading src until they
// are buffered; with fewer, it returns them and the error that stopped it.
// The bytes are valid until the next read.
func (b *readBuf) Peek(n int) ([]byte, error) {
	if n < 0 {
		return nil, errNegativeCount
	}
	if n > readBufSize {
		return b.buf[b.r:b.w], errors.New("rpcd: peek past the read buffer")
	}
	for b.w-b.r < n && b.err == nil {
		b.fill(n)
	}
	if avail := b.w - b.r; avail < n {
		return b.buf[b.r:b.w], b.readErr()
	}
	return b.buf[b.r : b.r+n], nil
}

// Discard skips the next n bytes, reading src as it needs to, and
// returns how many it skipped, with the error that stopped it short.
func (b *readBuf) Discard(n int) (int, error) {
	if n < 0 {
		return 0, errNegativeCount
	}
	done := 0
	for {
		skip := min(b.w-b.r, n-done)
		b.r += skip
		done += skip
		if done == n {
			return n, nil
		}
		if b.err != nil {
			return done, b.readErr()
		}
		b.fill(0)
	}
}

// Read reads into p: what is buffered, else one read of src, straight
// into p if p is at least as large as the buffer.
func (b *readBuf) Read(p []byte) (int, error) {
	if len(p) == 0 {
		if b.Buffered() > 0 {
			return 0, nil
		}
		return 0, b.readErr()
	}
	if b.r == b.w {
		if b.err != nil {
			return 0, b.readErr()
		}
		if len(p) >= len(b.buf) {
			n, err := b.src.Read(p)
			if n < 0 {
				panic("rpcd: a reader returned a negative count")
			}
			return n, err
		}
		b.r, b.w = 0, 0
		b.fill(0)
		if b.r == b.w {
			return 0, b.readErr()
		}
	}
	n := copy(p, b.buf[b.r:b.w])
	b.r += n
	return n, nil
}
