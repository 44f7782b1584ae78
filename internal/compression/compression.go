// Package compression compresses and expands the payloads of rpcd frames:
// gzip (RFC 1952) and Zstandard (RFC 8878), the algorithms a frame's flags
// name (docs/protocol.md, "Compression").
//
// Both directions append to a caller's buffer and reuse their coders, so a
// payload compressed or expanded into a buffer with room allocates nothing
// as a rule. Expand bounds what it writes: a payload that expands past the
// receiver's limit is an error, not memory spent.
package compression

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"runtime"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/rpcd/rpcd/proto"
)

// Supported returns the compressions this package does, in rpcd's order of
// preference: what a peer names in its Hello or Welcome. (A function, not a
// variable, so that no caller can change what every peer in the process
// says.)
func Supported() []proto.Compression {
	return []proto.Compression{proto.CompressionZstd, proto.CompressionGzip}
}

// ErrTooLarge is Expand's error for a payload that expands past its limit.
var ErrTooLarge = errors.New("rpcd: compressed payload expands past the limit")

// Append appends src compressed with c to dst. It panics for a compression
// this package does not do, as the caller chose c.
func Append(dst, src []byte, c proto.Compression) []byte {
	switch c {
	case proto.CompressionZstd:
		return zstdEncoder().EncodeAll(src, dst)
	case proto.CompressionGzip:
		return appendGzip(dst, src)
	}
	panic(fmt.Sprintf("rpcd: compression %v is not supported", c))
}

// Expand appends src, compressed with c, expanded to dst; it fails with
// ErrTooLarge if src expands to more than limit bytes, and with an error
// saying why if src is not a whole payload compressed with c.
func Expand(dst, src []byte, c proto.Compression, limit int) ([]byte, error) {
	orig := dst
	var err error
	switch {
	case c != proto.CompressionZstd && c != proto.CompressionGzip:
		return dst, fmt.Errorf("rpcd: compression %v is not supported", c)
	case len(src) == 0:
		err = errEmpty
	case c == proto.CompressionZstd:
		dst, err = expandZstd(dst, src, limit)
	default:
		dst, err = expandGzip(dst, src, limit)
	}
	if err == nil && len(dst)-len(orig) > limit { // zstd checks each of several frames
		err = ErrTooLarge
	}
	if err != nil {
		if err != ErrTooLarge {
			err = fmt.Errorf("rpcd: payload does not expand as %v: %w", c, err)
		}
		return orig, err // a decoder may return another slice, or none, on an error
	}
	return dst, nil
}

var errEmpty = errors.New("empty")

// bufs holds buffers for compressed payloads and what they expand to,
// for GetBuffer and PutBuffer.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// keepBuffer is the largest buffer PutBuffer keeps.
const keepBuffer = 1 << 20

// GetBuffer returns a pooled buffer, empty, for a payload to be compressed
// or expanded into; PutBuffer gives it back.
func GetBuffer() *[]byte { return bufs.Get().(*[]byte) }

// PutBuffer gives back the buffer GetBuffer returned as bp, now b (the
// same memory, grown or not); one grown past a megabyte is let go.
func PutBuffer(bp *[]byte, b []byte) {
	if cap(b) <= keepBuffer {
		*bp = b[:0]
		bufs.Put(bp)
	}
}

// coders bounds how many zstd coders run at once, each holding its tables:
// two per P, so that a loop rarely waits for one.
var coders = 2 * runtime.GOMAXPROCS(0)

// zstdEncoder is the process's zstd encoder, made at its first use; it
// is safe for concurrent use and keeps up to coders encoders.
var zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
	e, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(coders),
		zstd.WithZeroFrames(true),
	)
	if err != nil {
		panic(err) // the options are fixed
	}
	return e
})

// zstdFloor is the least bound a zstd decoder is made with. A decoder
// refuses a frame whose window is larger than its bound, and encoders
// write windows of a megabyte or more for payloads far smaller; what a
// payload expands to is checked against the caller's limit in any case.
const zstdFloor = 8 << 20

// expandZstd expands src, refusing at once a frame whose header says it
// holds more than limit bytes; a frame that does not say is stopped by the
// decoder's bound, limit rounded up to a power of two and at least
// zstdFloor, and checked by Expand.
func expandZstd(dst, src []byte, limit int) ([]byte, error) {
	var h zstd.Header
	if h.Decode(src) == nil && h.HasFCS && h.FrameContentSize > uint64(limit) {
		return dst, ErrTooLarge
	}
	dst, err := zstdDecoder(decoderBound(limit)).DecodeAll(src, dst)
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
		err = ErrTooLarge
	}
	return dst, err
}

// decoderBound is the bound of the decoder that expands a payload limited
// to limit bytes: limit rounded up to a power of two, and at least
// zstdFloor, so that the limits a stream's window makes (what is left of
// it, any number) share a few decoders.
func decoderBound(limit int) int {
	if limit <= zstdFloor {
		return zstdFloor
	}
	return 1 << bits.Len(uint(limit-1))
}

// zstdDecs holds a decoder per bound: a zstd decoder's bound on what it
// writes is an option fixed when it is made, and decoderBound leaves a
// process a few (a server's frame size, a client's, large stream windows).
var zstdDecs sync.Map // int -> *zstd.Decoder

func zstdDecoder(limit int) *zstd.Decoder {
	if d, ok := zstdDecs.Load(limit); ok {
		return d.(*zstd.Decoder)
	}
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(coders),
		zstd.WithDecoderMaxMemory(uint64(max(limit, 1))),
	)
	if err != nil {
		panic(err) // the options are fixed
	}
	if prev, loaded := zstdDecs.LoadOrStore(limit, d); loaded {
		d.Close()
		return prev.(*zstd.Decoder)
	}
	return d
}

// appender is an io.Writer that appends to b.
type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

type gzipWriter struct {
	zw  *gzip.Writer
	out appender
}

var gzipWriters = sync.Pool{New: func() any {
	w := &gzipWriter{}
	w.zw, _ = gzip.NewWriterLevel(&w.out, gzip.BestSpeed) // a valid level: no error
	return w
}}

func appendGzip(dst, src []byte) []byte {
	w := gzipWriters.Get().(*gzipWriter)
	w.out.b = dst
	w.zw.Reset(&w.out)
	_, _ = w.zw.Write(src) // appender never fails
	_ = w.zw.Close()
	dst = w.out.b
	w.out.b = nil
	gzipWriters.Put(w)
	return dst
}

type gzipReader struct {
	zr  gzip.Reader
	src bytes.Reader
}

var gzipReaders sync.Pool // of *gzipReader

func expandGzip(dst, src []byte, limit int) ([]byte, error) {
	r, _ := gzipReaders.Get().(*gzipReader)
	if r == nil {
		r = &gzipReader{}
	}
	defer gzipReaders.Put(r)
	r.src.Reset(src)
	if err := r.zr.Reset(&r.src); err != nil {
		return dst, err
	}
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)] // room to read into
		}
		m, err := r.zr.Read(dst[len(dst):min(cap(dst), len(dst)+limit+1)])
		dst = dst[:len(dst)+m]
		limit -= m
		if limit < 0 {
			return dst, ErrTooLarge
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}
