package proto

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// TestStreamConstants pins the stream kinds of docs/protocol.md.
func TestStreamConstants(t *testing.T) {
	pins := []struct {
		name      string
		got, want uint64
	}{
		{"KindStreamOpen", uint64(KindStreamOpen), 0x18},
		{"KindStreamData", uint64(KindStreamData), 0x19},
		{"KindStreamCredit", uint64(KindStreamCredit), 0x1A},
		{"KindStreamEnd", uint64(KindStreamEnd), 0x1B},
		{"KindStreamReset", uint64(KindStreamReset), 0x1C},
		{"MaxStreamWindow", MaxStreamWindow, 0x7FFFFFFF},
	}
	for _, p := range pins {
		if p.got != p.want {
			t.Errorf("%s = %#x, want %#x (docs/protocol.md)", p.name, p.got, p.want)
		}
	}
	for k := Kind(0x1D); k <= 0x1F; k++ {
		if k.Valid() {
			t.Errorf("%v is valid; 0x1D-0x1F are reserved", k)
		}
	}
	if !StreamOpenedByClient(1) || StreamOpenedByClient(2) {
		t.Error("odd stream ids are the client's, even ones the server's")
	}
}

// TestStreamFrames round-trips each stream frame through Decode.
func TestStreamFrames(t *testing.T) {
	open := AppendStreamOpen(nil, 7, "File/Up", CodecJSON, 250, AppendMetadata(nil, "k", []byte("v")), 1<<20)
	f, n, err := Decode(open, nil)
	if err != nil || n != len(open) || f.Kind != KindStreamOpen || string(f.Route) != "File/Up" ||
		f.Codec != CodecJSON || f.Deadline != 250 || f.StreamWindow() != 1<<20 || f.Metadata.Len() != 1 {
		t.Fatalf("open: %+v n=%d err=%v", f, n, err)
	}
	data := AppendStreamData(nil, 7, []byte("abc"))
	if f, _, err = Decode(data, nil); err != nil || string(f.Payload) != "abc" || f.ID != 7 {
		t.Fatalf("data: %+v %v", f, err)
	}
	if f, _, err = Decode(AppendStreamData(nil, 7, nil), nil); err != nil || len(f.Payload) != 0 {
		t.Fatalf("empty data: %+v %v", f, err)
	}
	if f, _, err = Decode(AppendStreamCredit(nil, 8, 4096), nil); err != nil || f.StreamWindow() != 4096 || f.ID != 8 {
		t.Fatalf("credit: %+v %v", f, err)
	}
	if f, _, err = Decode(AppendStreamEnd(nil, 9), nil); err != nil || f.Kind != KindStreamEnd {
		t.Fatalf("end: %+v %v", f, err)
	}
	f, _, err = Decode(AppendStreamReset(nil, 9, FlagUnprocessed, CodeNotFound, "x"), nil)
	if code, msg := f.ErrorBody(); err != nil || code != CodeNotFound || string(msg) != "x" || f.Flags != FlagUnprocessed {
		t.Fatalf("reset: %+v %v", f, err)
	}
}

// TestStreamRejects: every stream rule of docs/protocol.md's table is
// enforced, with a message naming it.
func TestStreamRejects(t *testing.T) {
	credit := func(n uint32) []byte {
		b := AppendStreamCredit(nil, 1, 1)
		binary.BigEndian.PutUint32(b[HeaderSize:], n)
		return b
	}
	cases := []struct {
		name string
		in   []byte
		want string
	}{
		{"open without route", AppendFrame(nil, Header{Kind: KindStreamOpen, ID: 1}, "", nil, []byte{0, 0, 0, 1}), "without a route"},
		{"open id 0", AppendStreamOpen(nil, 0, "r", CodecRaw, 0, nil, 1), "call id 0"},
		{"open short body", AppendFrame(nil, Header{Kind: KindStreamOpen, ID: 1}, "r", nil, []byte{0, 1}), "StreamOpen body of 2 bytes, want 4"},
		{"open window too large", patch(AppendStreamOpen(nil, 1, "r", CodecRaw, 0, nil, 1), func(b []byte) { b[HeaderSize+1] = 0x80 }), "stream window of 2147483649 bytes"},
		{"open unprocessed", patch(AppendStreamOpen(nil, 1, "r", CodecRaw, 0, nil, 1), func(b []byte) { b[4] = 1 }), "flag Unprocessed on a StreamOpen"},
		{"data with route", AppendFrame(nil, Header{Kind: KindStreamData, ID: 1}, "r", nil, nil), "route on a StreamData"},
		{"data with codec", patch(AppendStreamData(nil, 1, []byte("x")), func(b []byte) { b[5] = 1 }), "codec json on a StreamData"},
		{"data with deadline", AppendFrame(nil, Header{Kind: KindStreamData, ID: 1, Deadline: 3}, "", nil, nil), "deadline on a StreamData"},
		{"credit zero", credit(0), "stream credit of 0 bytes"},
		{"credit too large", credit(1 << 31), "stream credit of 2147483648 bytes"},
		{"credit long body", AppendFrame(nil, Header{Kind: KindStreamCredit, ID: 1}, "", nil, []byte{0, 0, 0, 1, 0}), "StreamCredit body of 5 bytes, want 4"},
		{"end with payload", AppendFrame(nil, Header{Kind: KindStreamEnd, ID: 1}, "", nil, []byte{1}), "StreamEnd frame with a payload of 1"},
		{"reset short", AppendFrame(nil, Header{Kind: KindStreamReset, ID: 1}, "", nil, []byte{1}), "StreamReset body of 1 bytes"},
		{"reset id 0", AppendStreamReset(nil, 0, 0, CodeCanceled, ""), "call id 0"},
		{"reserved 0x1d", patch(AppendStreamEnd(nil, 1), func(b []byte) { b[3] = 0x1D }), "unknown kind"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Decode(c.in, nil)
			if err == nil {
				t.Fatalf("Decode accepted % x", c.in)
			}
			if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want ErrProtocol containing %q", err, c.want)
			}
		})
	}
}

// encodeStream builds a stream vector of golden.txt with this package's
// encoders; nil for other kinds.
func (v *vector) encodeStream(t *testing.T, k Kind) []byte {
	f := v.fields
	id := uint32(num(t, f["id"]))
	switch k {
	case KindStreamOpen:
		codec := CodecRaw
		if f["codec"] == "json" {
			codec = CodecJSON
		}
		var md Metadata
		for _, m := range v.meta {
			key, val, _ := strings.Cut(m, "=")
			md = AppendMetadata(md, key, []byte(val))
		}
		return AppendStreamOpen(nil, id, f["route"], codec, uint32(num(t, f["deadline"])), md, uint32(num(t, f["window"])))
	case KindStreamData:
		b := AppendStreamData(nil, id, v.payload(t))
		if c, ok := ParseCompression(f["flags"]); ok {
			SetCompression(b, c)
		}
		return b
	case KindStreamCredit:
		_, takes := v.handshakeMeta()
		return AppendFirstStreamCredit(nil, id, uint32(num(t, f["window"])), takes...)
	case KindStreamEnd:
		return AppendStreamEnd(nil, id)
	case KindStreamReset:
		var flags Flags
		if f["flags"] == "Unprocessed" {
			flags = FlagUnprocessed
		}
		return AppendStreamReset(nil, id, flags, Code(num(t, f["code"])), f["message"])
	}
	return nil
}

// checkStream checks the body of a decoded stream vector against its fields.
func (v *vector) checkStream(t *testing.T, fr *Frame) {
	f := v.fields
	switch fr.Kind {
	case KindStreamOpen, KindStreamCredit:
		if uint64(fr.StreamWindow()) != num(t, f["window"]) {
			t.Errorf("window %d, want %s", fr.StreamWindow(), f["window"])
		}
	case KindStreamReset:
		code, msg := fr.ErrorBody()
		if uint64(code) != num(t, f["code"]) || string(msg) != f["message"] {
			t.Errorf("reset body %d %q", code, msg)
		}
		if (fr.Flags&FlagUnprocessed != 0) != (f["flags"] == "Unprocessed") {
			t.Errorf("flags %v", fr.Flags)
		}
	}
}
