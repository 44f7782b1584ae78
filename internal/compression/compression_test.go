package compression

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/rpcd/rpcd/proto"
)

// text is a compressible payload: JSON-like records.
func text(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		b.WriteString(`{"id":` + strings.Repeat("7", i%9+1) + `,"name":"rpcd","tags":["a","b"]},`)
	}
	return b.Bytes()[:n]
}

func noise(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	for _, c := range Supported() {
		for _, tc := range []struct {
			name string
			in   []byte
		}{
			{"empty", nil},
			{"one byte", []byte{42}},
			{"text 1 KiB", text(1 << 10)},
			{"text 1 MiB", text(1 << 20)},
			{"noise 64 KiB", noise(64 << 10)},
		} {
			t.Run(c.String()+"/"+tc.name, func(t *testing.T) {
				z := Append([]byte("head"), tc.in, c)
				if string(z[:4]) != "head" {
					t.Fatalf("Append overwrote dst's bytes: %q", z[:4])
				}
				if len(tc.in) >= 1<<10 && tc.name[:4] == "text" && len(z)-4 >= len(tc.in)/2 {
					t.Errorf("%d bytes of text compressed to %d", len(tc.in), len(z)-4)
				}
				out, err := Expand([]byte("pre"), z[4:], c, len(tc.in))
				if err != nil {
					t.Fatal(err)
				}
				if string(out[:3]) != "pre" || !bytes.Equal(out[3:], tc.in) {
					t.Fatalf("expanded %d bytes, want the %d given after dst's", len(out)-3, len(tc.in))
				}
			})
		}
	}
}

// TestExpandLimit: a payload that expands past the limit is refused with
// ErrTooLarge, dst as it was, and one exactly at the limit is taken.
func TestExpandLimit(t *testing.T) {
	for _, c := range Supported() {
		t.Run(c.String(), func(t *testing.T) {
			bomb := Append(nil, make([]byte, 8<<20), c) // 8 MiB of zeros: a few KiB
			if len(bomb) > 1<<20 {
				t.Fatalf("zeros compressed to %d bytes", len(bomb))
			}
			dst := []byte("keep")
			out, err := Expand(dst, bomb, c, 1<<20)
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Expand past the limit: err %v, want ErrTooLarge", err)
			}
			if string(out) != "keep" {
				t.Fatalf("dst after a refusal: %d bytes, want it as it was", len(out))
			}
			if cap(out) > 2*zstdFloor {
				t.Errorf("a refused payload grew dst to %d bytes", cap(out))
			}
			in := text(5000)
			if _, err := Expand(nil, Append(nil, in, c), c, len(in)); err != nil {
				t.Fatalf("at the limit: %v", err)
			}
			if _, err := Expand(nil, Append(nil, in, c), c, len(in)-1); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("one byte past the limit: err %v, want ErrTooLarge", err)
			}
		})
	}
}

// TestExpandZstdStream: a zstd frame that does not say its size (a
// streaming encoder's) is stopped by the decoder's bound, not expanded
// whole.
func TestExpandZstdStream(t *testing.T) {
	var z bytes.Buffer
	zw, err := zstd.NewWriter(&z)
	if err != nil {
		t.Fatal(err)
	}
	zeros := make([]byte, 1<<20)
	for range 64 { // 64 MiB
		if _, err := zw.Write(zeros); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	var h zstd.Header
	if err := h.Decode(z.Bytes()); err != nil || h.HasFCS {
		t.Fatalf("the stream's header: %+v, %v; want one without a content size", h, err)
	}
	out, err := Expand(nil, z.Bytes(), proto.CompressionZstd, 1<<20)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err %v, want ErrTooLarge", err)
	}
	if cap(out) > 2*zstdFloor {
		t.Errorf("a refused stream grew dst to %d bytes", cap(out))
	}
	// Within the limit, the same kind of frame expands.
	z.Reset()
	zw.Reset(&z)
	_, _ = zw.Write(text(3000))
	_ = zw.Close()
	if out, err := Expand(nil, z.Bytes(), proto.CompressionZstd, 3000); err != nil || !bytes.Equal(out, text(3000)) {
		t.Fatalf("a small stream: %d bytes, %v", len(out), err)
	}
}

func TestExpandCorrupt(t *testing.T) {
	for _, c := range Supported() {
		t.Run(c.String(), func(t *testing.T) {
			z := Append(nil, text(4096), c)
			for name, bad := range map[string][]byte{
				"garbage":   []byte("not compressed at all"),
				"truncated": z[:len(z)/2],
				"empty":     nil,
			} {
				if _, err := Expand(nil, bad, c, 1<<20); err == nil || errors.Is(err, ErrTooLarge) {
					t.Errorf("%s: err %v, want a decoding error", name, err)
				} else if !strings.Contains(err.Error(), c.String()) {
					t.Errorf("%s: error %q does not name %v", name, err, c)
				}
			}
			flipped := bytes.Clone(z)
			flipped[len(flipped)-6] ^= 0xff // inside the checksum or the data it covers
			if out, err := Expand(nil, flipped, c, 1<<20); err == nil && bytes.Equal(out, text(4096)) {
				t.Errorf("a flipped byte expanded to the original")
			}
		})
	}
	if _, err := Expand(nil, []byte{1}, proto.Compression(3), 10); err == nil {
		t.Error("Expand took an unknown compression")
	}
}

// TestAllocs: with coders warm and buffers with room, a payload compressed
// and expanded allocates nothing.
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items at random")
	}
	in := text(4 << 10)
	for _, tc := range []struct {
		c   proto.Compression
		max float64
	}{{proto.CompressionZstd, 0}, {proto.CompressionGzip, 0}} {
		z := make([]byte, 0, 8<<10)
		out := make([]byte, 0, 8<<10)
		z = Append(z, in, tc.c)
		out, _ = Expand(out, z, tc.c, len(in))
		n := testing.AllocsPerRun(100, func() {
			z = Append(z[:0], in, tc.c)
			var err error
			if out, err = Expand(out[:0], z, tc.c, len(in)); err != nil {
				t.Fatal(err)
			}
		})
		if n > tc.max {
			t.Errorf("%v: %.1f allocations per round trip, want at most %v", tc.c, n, tc.max)
		}
	}
}

// records returns n bytes of a JSON array of records with varied fields,
// as a service's listing might be: it compresses to about a fifth.
func records(n int) []byte {
	r := rand.New(rand.NewPCG(1, 1))
	zones := []string{"eu-west-1a", "eu-west-1b", "us-east-2c"}
	states := []string{"serving", "draining", "starting"}
	tags := []string{"db", "cache", "edge", "api", "batch", "gpu"}
	b := []byte{'['}
	for i := 0; len(b) < n; i++ {
		b = fmt.Appendf(b, `{"id":%d,"name":"node-%d","zone":%q,"state":%q,"load":%.3f,"tags":[%q,%q]},`,
			i, r.IntN(500), zones[r.IntN(3)], states[r.IntN(3)], r.Float64(), tags[r.IntN(6)], tags[r.IntN(6)])
	}
	return b[:n]
}

// BenchmarkCompression compresses and expands a 16 KiB JSON listing
// (records), as a call's payload.
func BenchmarkCompression(b *testing.B) {
	in := records(16 << 10)
	for _, c := range Supported() {
		b.Run(c.String()+"/append", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(in)))
			z := make([]byte, 0, len(in))
			for b.Loop() {
				z = Append(z[:0], in, c)
			}
			b.ReportMetric(float64(len(z))/float64(len(in)), "ratio")
		})
		b.Run(c.String()+"/expand", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(in)))
			z := Append(nil, in, c)
			out := make([]byte, 0, len(in))
			for b.Loop() {
				out, _ = Expand(out[:0], z, c, len(in))
			}
		})
	}
}

// TestDecoderBounds: limits share a few zstd decoders: every limit up to
// zstdFloor takes the floor's, larger ones the next power of two, so the
// limits a large stream window makes (what is left of it: any number) do
// not make a decoder each.
func TestDecoderBounds(t *testing.T) {
	for _, c := range []struct{ limit, bound int }{
		{0, zstdFloor}, {1, zstdFloor}, {zstdFloor, zstdFloor},
		{zstdFloor + 1, 2 * zstdFloor}, {3 * zstdFloor, 4 * zstdFloor}, {1 << 30, 1 << 30},
	} {
		if got := decoderBound(c.limit); got != c.bound {
			t.Errorf("decoderBound(%d) = %d, want %d", c.limit, got, c.bound)
		}
	}
	src := Append(nil, []byte("a payload a stream sends"), proto.CompressionZstd)
	for limit := zstdFloor; limit < 64<<20; limit += 1<<20 + 12345 {
		if _, err := Expand(nil, src, proto.CompressionZstd, limit); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	zstdDecs.Range(func(any, any) bool { n++; return true })
	if n > 5 { // 8, 16, 32 and 64 MiB, and whatever other tests made
		t.Fatalf("%d zstd decoders after 56 limits from 8 to 64 MiB", n)
	}
}
