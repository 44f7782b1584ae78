package proto

import (
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
)

func sumRequest() []byte {
	h := Header{Kind: KindRequest, Codec: CodecJSON, ID: 1, Deadline: 1000}
	return AppendFrame(nil, h, "Math/Sum", nil, []byte(`{"a":1,"b":2}`))
}

// patch returns a copy of b with f applied.
func patch(b []byte, f func(b []byte)) []byte {
	c := append([]byte(nil), b...)
	f(c)
	return c
}

func TestDecodeRejects(t *testing.T) {
	req := sumRequest()
	cases := []struct {
		name string
		in   []byte
		lim  *Limits
		want string
	}{
		{"bad magic", patch(req, func(b []byte) { b[0] = 'G' }), nil, "bad magic"},
		{"http", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), nil, "bad magic"},
		{"version 2", patch(req, func(b []byte) { b[2] = 2 }), nil, "unsupported version 2"},
		{"reserved kind", patch(req, func(b []byte) { b[3] = 0x0D }), nil, "unknown kind Kind(0xd)"},
		{"kind zero", patch(req, func(b []byte) { b[3] = 0 }), nil, "unknown kind"},
		{"reserved flag", patch(req, func(b []byte) { b[4] = 0x80 }), nil, "reserved flag bits"},
		{"unprocessed on request", patch(req, func(b []byte) { b[4] = 0x01 }), nil, "flag Unprocessed on a Request"},
		{"reserved compression", patch(req, func(b []byte) { b[4] = 0x06 }), nil, "reserved compression 3"},
		{"compressed error", patch(AppendError(nil, 1, 0, CodeInternal, "x"), func(b []byte) { b[4] = 0x04 }), nil, "a compressed Error frame"},
		{"compressed ping", patch(AppendPing(nil, nil), func(b []byte) { b[4] = 0x02 }), nil, "a compressed Ping frame"},
		{"reserved field", patch(req, func(b []byte) { b[19] = 1 }), nil, "reserved header field"},
		{"request id 0", patch(req, func(b []byte) { binary.BigEndian.PutUint32(b[8:], 0) }), nil, "call id 0"},
		{"ping with id", patch(AppendPing(nil, nil), func(b []byte) { b[11] = 1 }), nil, "want 0"},
		{"request without route", AppendFrame(nil, Header{Kind: KindRequest, ID: 1}, "", nil, nil), nil, "without a route"},
		{"route on response", AppendFrame(nil, Header{Kind: KindResponse, ID: 1}, "x", nil, nil), nil, "route on a Response"},
		{"deadline on response", AppendFrame(nil, Header{Kind: KindResponse, ID: 1, Deadline: 5}, "", nil, nil), nil, "deadline on a Response"},
		{"codec on error", patch(AppendError(nil, 1, 0, CodeInternal, "x"), func(b []byte) { b[5] = 1 }), nil, "codec json on a Error"},
		{"route too long", AppendFrame(nil, Header{Kind: KindRequest, ID: 1}, strings.Repeat("a", 257), nil, nil), nil, "route of 257 bytes exceeds the limit of 256"},
		{"route limit set", req, &Limits{MaxRoute: 4}, "route of 8 bytes exceeds the limit of 4"},
		{"route not printable", AppendFrame(nil, Header{Kind: KindRequest, ID: 1}, "a b", nil, nil), nil, "route byte 0x20"},
		{"metadata too long", patch(req, func(b []byte) { binary.BigEndian.PutUint16(b[16:], 9000) }), nil, "metadata of 9000 bytes exceeds"},
		{"frame too long", patch(req, func(b []byte) { binary.BigEndian.PutUint32(b[20:], 0xFFFFFFFF) }), nil, "frame of 4294967327 bytes exceeds the limit of 4194304"},
		{"frame limit set", req, &Limits{MaxFrameSize: 40}, "frame of 45 bytes exceeds the limit of 40"},
		{"short error body", AppendFrame(nil, Header{Kind: KindError, ID: 1}, "", nil, []byte{0}), nil, "error body of 1 bytes"},
		{"short go-away body", AppendFrame(nil, Header{Kind: KindGoAway}, "", nil, []byte{0, 0, 0}), nil, "go-away body of 3 bytes"},
		{"cancel with payload", AppendFrame(nil, Header{Kind: KindCancel, ID: 1}, "", nil, []byte{1}), nil, "cancel frame with a payload"},
		{"ping too big", AppendPing(nil, make([]byte, 65)), nil, "Ping payload of 65 bytes exceeds 64"},
		{"metadata empty key", AppendFrame(nil, Header{Kind: KindRequest, ID: 1}, "r", Metadata{0, 0, 0}, nil), nil, "empty key"},
		{"metadata past end", AppendFrame(nil, Header{Kind: KindRequest, ID: 1}, "r", Metadata{1, 'k', 0, 5, 'v'}, nil), nil, "value at offset 0 runs past"},
		{"metadata truncated entry", AppendFrame(nil, Header{Kind: KindRequest, ID: 1}, "r", Metadata{3, 'k'}, nil), nil, "entry at offset 0 runs past"},
		{"metadata key space", AppendFrame(nil, Header{Kind: KindRequest, ID: 1}, "r", Metadata{1, ' ', 0, 0}, nil), nil, "key byte 0x20"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, n, err := Decode(c.in, c.lim)
			if err == nil {
				t.Fatalf("Decode accepted % x (n=%d)", c.in, n)
			}
			if !errors.Is(err, ErrProtocol) {
				t.Errorf("error %v does not match ErrProtocol", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want it to contain %q", err, c.want)
			}
			if !strings.HasPrefix(err.Error(), "rpcd: ") {
				t.Errorf("error %q lacks the rpcd: prefix", err)
			}
		})
	}
}

// TestDecodePrefixes: every proper prefix of a frame is "not enough bytes
// yet", never an error, and the header is known once its 24 bytes are in.
func TestDecodePrefixes(t *testing.T) {
	md := AppendMetadata(nil, "tenant", []byte("acme"))
	frame := AppendFrame(nil, Header{Kind: KindRequest, Codec: CodecRaw, ID: 77}, "Bench/EchoPacket", md, []byte("0123456789abcdef"))
	for i := 0; i < len(frame); i++ {
		f, n, err := Decode(frame[:i], nil)
		if err != nil || n != 0 {
			t.Fatalf("prefix %d: n %d, err %v", i, n, err)
		}
		if i >= HeaderSize && f.Len() != len(frame) {
			t.Fatalf("prefix %d: header announces %d bytes, want %d", i, f.Len(), len(frame))
		}
	}
	f, n, err := Decode(append(frame, 0x52), nil) // the next frame's first byte
	if err != nil || n != len(frame) {
		t.Fatalf("whole frame: n %d, err %v", n, err)
	}
	if string(f.Route) != "Bench/EchoPacket" || string(f.Payload) != "0123456789abcdef" || f.ID != 77 {
		t.Fatalf("decoded %+v", f)
	}
	if v, _ := f.Metadata.Get("tenant"); string(v) != "acme" {
		t.Fatalf("metadata tenant = %q", v)
	}
}

// TestDecodeHugeLengthEarly: a header announcing a frame far over the limit
// is refused with only the header in hand.
func TestDecodeHugeLengthEarly(t *testing.T) {
	hdr := patch(sumRequest()[:HeaderSize], func(b []byte) { binary.BigEndian.PutUint32(b[20:], 0xFFFFFFFF) })
	if _, _, err := Decode(hdr, nil); err == nil {
		t.Fatal("a 4 GiB frame header was accepted")
	}
}

func TestBeginFinishFrame(t *testing.T) {
	md := AppendMetadata(nil, "k", []byte("v"))
	buf := []byte("previous bytes")
	buf, start := BeginFrame(buf, Header{Kind: KindResponse, Codec: CodecJSON, ID: 5}, "", md)
	buf = append(buf, `"hello"`...)
	if n := FinishFrame(buf, start); n != len(buf)-start {
		t.Fatalf("FinishFrame = %d, want %d", n, len(buf)-start)
	}
	want := AppendFrame([]byte("previous bytes"), Header{Kind: KindResponse, Codec: CodecJSON, ID: 5}, "", md, []byte(`"hello"`))
	if string(buf) != string(want) {
		t.Fatalf("got % x\nwant % x", buf, want)
	}
}

func TestAfter(t *testing.T) {
	cases := []struct {
		a, b uint32
		want bool
	}{
		{2, 1, true}, {1, 2, false}, {1, 1, false},
		{1, 0xFFFFFFFF, true}, {0xFFFFFFFF, 1, false},
		{0x80000000, 1, true},
	}
	for _, c := range cases {
		if got := After(c.a, c.b); got != c.want {
			t.Errorf("After(%#x, %#x) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestMetadata(t *testing.T) {
	var md Metadata
	md = AppendMetadata(md, "a", []byte("1"))
	md = AppendMetadata(md, "b", nil)
	md = AppendMetadata(md, "a", []byte("2"))
	if err := md.Validate(); err != nil {
		t.Fatal(err)
	}
	if md.Len() != 3 {
		t.Fatalf("Len = %d", md.Len())
	}
	if v, ok := md.Get("a"); !ok || string(v) != "1" {
		t.Fatalf("Get(a) = %q %v, want the first value", v, ok)
	}
	if v, ok := md.Get("b"); !ok || len(v) != 0 {
		t.Fatalf("Get(b) = %q %v", v, ok)
	}
	if _, ok := md.Get("c"); ok {
		t.Fatal("Get(c) found a key never set")
	}
	var keys []string
	md.Range(func(k, _ []byte) bool { keys = append(keys, string(k)); return len(keys) < 2 })
	if strings.Join(keys, ",") != "a,b" {
		t.Fatalf("Range stopped wrong: %v", keys)
	}
	for _, bad := range []string{"", strings.Repeat("k", 256), "a b", "\x00"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("AppendMetadata(%q) did not panic", bad)
				}
			}()
			AppendMetadata(nil, bad, nil)
		}()
	}
}

func TestDecodeAllocs(t *testing.T) {
	md := AppendMetadata(nil, "traceparent", []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"))
	frame := AppendFrame(nil, Header{Kind: KindRequest, Codec: CodecRaw, ID: 1, Deadline: 50}, "Bench/EchoPacket", md, make([]byte, 16))
	buf := make([]byte, 0, 256)
	allocs := testing.AllocsPerRun(1000, func() {
		f, n, err := Decode(frame, nil)
		if err != nil || n != len(frame) {
			t.Fatal(n, err)
		}
		if _, ok := f.Metadata.Get("traceparent"); !ok {
			t.Fatal("metadata lost")
		}
		var start int
		buf, start = BeginFrame(buf[:0], Header{Kind: KindResponse, ID: f.ID}, "", nil)
		buf = append(buf, f.Payload...)
		FinishFrame(buf, start)
	})
	if allocs != 0 {
		t.Fatalf("decode and encode allocate %.1f times per frame, want 0", allocs)
	}
}

func BenchmarkDecode(b *testing.B) {
	frame := AppendFrame(nil, Header{Kind: KindRequest, Codec: CodecRaw, ID: 1}, "Bench/EchoPacket", nil, make([]byte, 16))
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		if _, _, err := Decode(frame, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendFrame(b *testing.B) {
	payload := make([]byte, 16)
	buf := make([]byte, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendFrame(buf[:0], Header{Kind: KindResponse, ID: 1}, "", nil, payload)
	}
}

// TestHeaderChecksAgree sets every header byte of every golden frame to
// every value and checks that decodeHeader's fast path and explainHeader,
// which builds the messages, accept and refuse the same headers.
func TestHeaderChecksAgree(t *testing.T) {
	refused := 0
	for _, v := range readGolden(t) {
		for i := 0; i < HeaderSize; i++ {
			for x := 0; x < 256; x++ {
				b := patch(v.bytes, func(b []byte) { b[i] = byte(x) })
				for _, l := range []*Limits{nil, {MaxFrameSize: 64, MaxRoute: 8, MaxMetadata: 16}} {
					var h Header
					fast, slow := decodeHeader(b, l, &h), explainHeader(b, l)
					if (fast == nil) != (slow == nil) || (fast != nil && fast.Error() != slow.Error()) {
						t.Fatalf("%s with byte %d = %#x: fast %v, rule by rule %v", v.name, i, x, fast, slow)
					}
					if fast != nil {
						refused++
					}
				}
			}
		}
	}
	if refused == 0 {
		t.Fatal("no mutated header was refused")
	}
}

// TestPrintable checks the eight-bytes-at-a-time route check against the
// plain one for every byte value at every position of routes of several
// lengths.
func TestPrintable(t *testing.T) {
	for _, n := range []int{1, 7, 8, 9, 16, 23} {
		for i := 0; i < n; i++ {
			for x := 0; x < 256; x++ {
				b := []byte(strings.Repeat("a", n))
				b[i] = byte(x)
				want := x >= 0x21 && x <= 0x7e
				if got := printable(b); got != want {
					t.Fatalf("printable(% x) = %v, want %v", b, got, want)
				}
			}
		}
	}
}

func TestBeginResponse(t *testing.T) {
	buf, start := BeginResponse([]byte("head"), 9, CodecJSON)
	buf = append(buf, "42"...)
	FinishFrame(buf, start)
	want := AppendFrame([]byte("head"), Header{Kind: KindResponse, Codec: CodecJSON, ID: 9}, "", nil, []byte("42"))
	if start != 4 || string(buf) != string(want) {
		t.Fatalf("start %d, frame % x, want % x", start, buf, want)
	}
}

// TestFinishFrameWith: a frame whose payload's tail is written after buf,
// from elsewhere, gets the whole payload's length.
func TestFinishFrameWith(t *testing.T) {
	md := AppendMetadata(nil, "k", []byte("v"))
	buf, start := BeginFrame([]byte("head"), Header{Kind: KindResponse, ID: 9}, "", md)
	buf = append(buf, "in buf, "...)
	tail := []byte("and from elsewhere")
	if n := FinishFrameWith(buf, start, len(tail)); n != len(buf)-start+len(tail) {
		t.Fatalf("FinishFrameWith = %d, want %d", n, len(buf)-start+len(tail))
	}
	got := append(buf, tail...)
	want := AppendFrame([]byte("head"), Header{Kind: KindResponse, ID: 9}, "", md, []byte("in buf, and from elsewhere"))
	if string(got) != string(want) {
		t.Fatalf("got % x\nwant % x", got, want)
	}
}

func TestAppendHead(t *testing.T) {
	md := AppendMetadata(nil, "k", []byte("v"))
	h := Header{Kind: KindRequest, ID: 4}
	payload := []byte("the payload")
	got := append(AppendHead([]byte("x"), h, "A/B", md, len(payload)), payload...)
	if want := AppendFrame([]byte("x"), h, "A/B", md, payload); string(got) != string(want) {
		t.Fatalf("head + payload\n got % x\nwant % x", got, want)
	}
}

// TestAppendRequest: a Request from its fields one by one is AppendFrame's,
// each field in its place (a field mixed up with another would differ).
func TestAppendRequest(t *testing.T) {
	got := AppendRequest([]byte("x"), 0x01020304, Flags(0).WithCompression(CompressionZstd), CodecJSON, 0x0a0b0c0d, "A/B", []byte("payload"))
	h := Header{Kind: KindRequest, Flags: Flags(0).WithCompression(CompressionZstd), Codec: CodecJSON, ID: 0x01020304, Deadline: 0x0a0b0c0d}
	if want := AppendFrame([]byte("x"), h, "A/B", nil, []byte("payload")); string(got) != string(want) {
		t.Fatalf("AppendRequest\n got % x\nwant % x", got, want)
	}
	if f, _, err := Decode(got[1:], nil); err != nil || f.Header != (Header{Kind: KindRequest, Flags: h.Flags, Codec: CodecJSON, ID: h.ID, Deadline: h.Deadline, RouteLen: 3, PayloadLen: 7}) {
		t.Fatalf("decoded %+v, %v", f.Header, err)
	}
}

// TestDecodeHeaderIntoOverwrites: decoding into a header that holds
// another frame's fields leaves none of them (decodeHeader stores field by
// field: a field it forgot would keep the old value), for every golden
// frame; a short buffer zeroes the header.
func TestDecodeHeaderIntoOverwrites(t *testing.T) {
	for _, v := range readGolden(t) {
		want, wantErr := DecodeHeader(v.bytes, nil)
		h := Header{Kind: 0xff, Flags: 0xff, Codec: 0xff, RouteLen: 0xffff, ID: ^uint32(0),
			Deadline: ^uint32(0), MetadataLen: 0xffff, PayloadLen: ^uint32(0)}
		if err := DecodeHeaderInto(&h, v.bytes, nil); (err == nil) != (wantErr == nil) {
			t.Fatalf("%s: DecodeHeaderInto %v, DecodeHeader %v", v.name, err, wantErr)
		}
		var zero Header
		if err := decodeHeader(v.bytes, nil, &zero); (err == nil) != (wantErr == nil) || h != zero || (wantErr == nil && h != want) {
			t.Fatalf("%s: into a used header %+v, into a zero one %+v", v.name, h, zero)
		}
	}
	h := Header{Kind: KindRequest, ID: 7}
	if err := DecodeHeaderInto(&h, make([]byte, HeaderSize-1), nil); !errors.Is(err, io.ErrShortBuffer) || h != (Header{}) {
		t.Fatalf("short buffer: %v, header %+v; want io.ErrShortBuffer and a zero header", err, h)
	}
}
