package proto

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// decodeAll decodes every frame in b, as a receiver holding all of b at once
// would, and returns the frames re-encoded plus the first error.
func decodeAll(b []byte, lim *Limits) (frames [][]byte, rest int, err error) {
	for {
		f, n, err := Decode(b, lim)
		if err != nil {
			return frames, len(b), err
		}
		if n == 0 {
			return frames, len(b), nil
		}
		frames = append(frames, reencode(&f))
		b = b[n:]
	}
}

// decodeStream feeds b to a receiver in pieces of the given sizes, as a
// socket would deliver it, decoding whole frames as they complete into one
// Frame, as the reactor does.
func decodeStream(b []byte, lim *Limits, sizes []int) (frames [][]byte, rest int, err error) {
	var buf []byte
	var f Frame
	for i := 0; len(b) > 0; i++ {
		n := sizes[i%len(sizes)]
		if n > len(b) {
			n = len(b)
		}
		buf = append(buf, b[:n]...)
		b = b[n:]
		for {
			m, err := f.Decode(buf, lim)
			if err != nil {
				if m != 0 {
					panic(fmt.Sprintf("Frame.Decode returned n = %d with the error %v", m, err))
				}
				return frames, len(buf) + len(b), err
			}
			if m == 0 {
				break
			}
			frames = append(frames, reencode(&f))
			buf = buf[m:]
		}
	}
	return frames, len(buf), nil
}

func reencode(f *Frame) []byte {
	return AppendFrame(nil, f.Header, string(f.Route), f.Metadata, f.Payload)
}

func FuzzDecode(f *testing.F) {
	md := AppendMetadata(nil, "traceparent", []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"))
	seeds := [][]byte{
		sumRequest(),
		AppendFrame(nil, Header{Kind: KindRequest, ID: 2}, "Bench/EchoPacket", md, []byte("0123456789abcdef")),
		AppendFrame(nil, Header{Kind: KindResponse, Codec: CodecJSON, ID: 1}, "", nil, []byte("3")),
		AppendError(nil, 2, FlagUnprocessed, CodeNotFound, "no route"),
		AppendGoAway(nil, 41, CodeUnavailable, "draining"),
		AppendCancel(nil, 9),
		AppendPing(nil, []byte("12345678")),
		append(AppendPong(nil, nil), sumRequest()...),
		[]byte("GET / HTTP/1.1\r\n\r\n"),
	}
	for _, s := range seeds {
		f.Add(s, uint8(1), uint8(7))
	}
	lim := &Limits{MaxFrameSize: 1 << 16}
	f.Fuzz(func(t *testing.T, in []byte, s1, s2 uint8) {
		// The fast header check and the rule-by-rule one agree on every
		// header, under the fuzz limits and the defaults.
		if len(in) >= HeaderSize {
			for _, l := range []*Limits{lim, nil} {
				var h Header
				fast, slow := decodeHeader(in, l, &h), explainHeader(in, l)
				if (fast == nil) != (slow == nil) || (fast != nil && fast.Error() != slow.Error()) {
					t.Fatalf("header % x: fast check %v, rule by rule %v", in[:HeaderSize], fast, slow)
				}
			}
		}
		whole, restWhole, errWhole := decodeAll(in, lim)
		// A frame that decodes must re-encode to exactly its bytes.
		off := 0
		for _, fr := range whole {
			if !bytes.Equal(fr, in[off:off+len(fr)]) {
				t.Fatalf("frame at %d re-encodes to % x, was % x", off, fr, in[off:off+len(fr)])
			}
			off += len(fr)
		}
		if errWhole != nil && !errors.Is(errWhole, ErrProtocol) {
			t.Fatalf("error %v does not wrap ErrProtocol", errWhole)
		}
		// Fed in pieces, the same frames and the same verdict come out.
		sizes := []int{int(s1)%64 + 1, int(s2)%64 + 1}
		pieces, restPieces, errPieces := decodeStream(in, lim, sizes)
		if len(pieces) != len(whole) {
			t.Fatalf("in pieces %v: %d frames, whole: %d", sizes, len(pieces), len(whole))
		}
		for i := range whole {
			if !bytes.Equal(pieces[i], whole[i]) {
				t.Fatalf("frame %d differs when fed in pieces", i)
			}
		}
		if (errPieces == nil) != (errWhole == nil) {
			t.Fatalf("whole: %v; in pieces: %v", errWhole, errPieces)
		}
		if errWhole == nil && restPieces != restWhole {
			t.Fatalf("left over %d bytes in pieces, %d whole", restPieces, restWhole)
		}
	})
}
