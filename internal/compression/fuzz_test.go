package compression

import (
	"bytes"
	"errors"
	"testing"

	"github.com/rpcd/rpcd/proto"
)

// FuzzExpand feeds Expand arbitrary bytes as either compression: it must
// never panic, never write past its limit, leave dst's bytes alone, and
// give back what Append made of any input.
//
// Kept in testdata: b477a4c60995c502, a zstd frame header naming a
// dictionary, on which the decoder returned no slice at all; Expand sliced
// that nil and panicked, and now hands back the caller's dst on any error.
func FuzzExpand(f *testing.F) {
	for _, c := range Supported() {
		f.Add(Append(nil, []byte("hello, rpcd"), c), uint8(c), uint16(64))
		f.Add(Append(nil, make([]byte, 4096), c), uint8(c), uint16(100)) // expands past the limit
		f.Add(Append(nil, text(2000), c), uint8(c), uint16(2000))
	}
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}, uint8(proto.CompressionGzip), uint16(10))
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0x58}, uint8(proto.CompressionZstd), uint16(10))
	f.Fuzz(func(t *testing.T, src []byte, alg uint8, limit uint16) {
		c := proto.Compression(alg % 4)
		out, err := Expand([]byte("pre"), src, c, int(limit))
		if string(out[:3]) != "pre" {
			t.Fatalf("dst's bytes changed: %q", out[:3])
		}
		if err == nil && len(out)-3 > int(limit) {
			t.Fatalf("expanded %d bytes past the limit %d", len(out)-3, limit)
		}
		if err != nil && len(out) != 3 {
			t.Fatalf("failed with %d bytes left in dst: %v", len(out)-3, err)
		}
		if c != proto.CompressionZstd && c != proto.CompressionGzip {
			return
		}
		// Whatever src is, as a payload it must come back.
		z := Append(nil, src, c)
		back, err := Expand(nil, z, c, len(src))
		if err != nil || !bytes.Equal(back, src) {
			t.Fatalf("round trip of %d bytes: %d back, %v", len(src), len(back), err)
		}
		if len(src) > 0 {
			if _, err := Expand(nil, z, c, len(src)-1); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("round trip under the limit: err %v, want ErrTooLarge", err)
			}
		}
	})
}
