package readbuf

import (
	"errors"
	"io"
)

// Sizes: a Buf starts at MinSize (or its floor, NewWith), grows, doubling,
// to MaxSize while reads fill it or a Peek needs the room, and halves
// again, down to where it started, once shrinkAfter reads in a row used
// under a quarter of it. MaxSize is the largest Peek: frames up to it are
// read whole.
//
// Why not a bufio.Reader of MaxSize: on the client, its 64 KiB per
// connection were most of the 90 KiB a connection cost (a client of one
// connection in a soak of 10,000); a busy connection's buffer still grows
// to 64 KiB, where one read takes in the replies of a burst.
const (
	MinSize     = 4 << 10
	MaxSize     = 64 << 10
	shrinkAfter = 64
)

// Buf is a read buffer over src that grows and shrinks (MinSize). One
// goroutine at a time uses it.
type Buf struct {
	src   io.Reader
	buf   []byte
	r, w  int   // buf[r:w] is buffered
	err   error // from src, returned once the buffered bytes are used
	small int   // reads in a row that used under a quarter of buf
	floor int   // the least it shrinks to
}

var errNegativeCount = errors.New("rpcd: negative count")

// errFull is Fill's error when the buffer holds MaxSize bytes or more and
// they are not consumed: no frame read through it may be that large.
var errFull = errors.New("rpcd: input buffer full")

// Init makes b, a zero Buf that is never copied after (a field of its
// owner's, on the owner's cache lines), a Buf reading src, of MinSize
// bytes to start with.
func (b *Buf) Init(src io.Reader) {
	*b = Buf{src: src, buf: make([]byte, MinSize), floor: MinSize}
}

// NewWith returns a Buf reading src that holds carry first (bytes read
// from src before) and never shrinks below floor bytes (MinSize to
// MaxSize), nor below carry until what it holds is used.
func NewWith(src io.Reader, floor int, carry []byte) *Buf {
	floor = min(max(floor, MinSize), MaxSize)
	b := &Buf{src: src, buf: make([]byte, max(floor, len(carry))), floor: floor}
	b.w = copy(b.buf, carry)
	return b
}

// Size is the largest Peek: frames up to it are read whole.
func (b *Buf) Size() int { return MaxSize }

// Buffered returns the number of bytes that can be read without reading
// src.
func (b *Buf) Buffered() int { return b.w - b.r }

// Bytes returns the buffered bytes, without reading src. They are valid
// until the next read or Discard.
func (b *Buf) Bytes() []byte { return b.buf[b.r:b.w] }

// readErr returns the error src gave, and forgets it.
func (b *Buf) readErr() error {
	err := b.err
	b.err = nil
	return err
}

// Fill reads src once into the buffer, making room first (readOnce), and
// returns what src's Read returned, its error included, as it comes: none
// is kept for later. It is for a caller that reads with deadlines of its
// own and consumes the buffer with Bytes and Discard alone (a Discard of no
// more than is buffered reads nothing); Peek, Discard and Read, which read
// src themselves, keep src's error until the buffered bytes are used, and
// are not to be mixed with it. A buffer of MaxSize bytes or more, full,
// with none of them consumed, is an error: nothing read through it may be
// that large.
func (b *Buf) Fill() (int, error) {
	if b.r == 0 && b.w == len(b.buf) && len(b.buf) >= MaxSize {
		return 0, errFull
	}
	return b.readOnce(0)
}

// fill reads src into the buffer, first making room for need bytes in
// all, until a read brings bytes or an error, which it keeps in b.err.
func (b *Buf) fill(need int) {
	for range 100 { // as bufio: a reader that keeps returning nothing is broken
		n, err := b.readOnce(need)
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

// readOnce reads src once into the buffer, first making room for need
// bytes in all: the buffered ones slid to its start, and the buffer grown
// if they do not fit, or if it is full. It then sizes the buffer for the
// next read (fit).
func (b *Buf) readOnce(need int) (int, error) {
	if b.r > 0 {
		copy(b.buf, b.buf[b.r:b.w])
		b.w -= b.r
		b.r = 0
	}
	if need > len(b.buf) || b.w == len(b.buf) && len(b.buf) < MaxSize {
		b.resize(min(max(need, 2*len(b.buf)), MaxSize))
	}
	room := len(b.buf) - b.w
	n, err := b.src.Read(b.buf[b.w:])
	if n < 0 {
		panic("rpcd: a reader returned a negative count")
	}
	b.w += n
	b.fit(n, room)
	return n, err
}

// fit sizes the buffer after a read of n bytes into room: twice as large
// when the read filled it, half once reads have stayed small.
func (b *Buf) fit(n, room int) {
	switch {
	case n == room && len(b.buf) < MaxSize:
		b.resize(min(2*len(b.buf), MaxSize))
		b.small = 0
	case len(b.buf) > b.floor && n < len(b.buf)/4:
		if b.small++; b.small >= shrinkAfter && b.w-b.r <= len(b.buf)/2 {
			b.resize(len(b.buf) / 2)
			b.small = 0
		}
	default:
		b.small = 0
	}
}

// resize moves the buffered bytes into a buffer of n bytes, n at least
// what is buffered.
func (b *Buf) resize(n int) {
	nb := make([]byte, max(n, b.floor))
	b.w = copy(nb, b.buf[b.r:b.w])
	b.r = 0
	b.buf = nb
}

// Peek returns the next n bytes without advancing, reading src until they
// are buffered; with fewer, it returns them and the error that stopped it.
// The bytes are valid until the next read.
func (b *Buf) Peek(n int) ([]byte, error) {
	if n < 0 {
		return nil, errNegativeCount
	}
	if n > MaxSize {
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
func (b *Buf) Discard(n int) (int, error) {
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
func (b *Buf) Read(p []byte) (int, error) {
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
