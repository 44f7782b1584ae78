package proto

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
)

// vector is one block of testdata/golden.txt.
type vector struct {
	name   string
	fields map[string]string
	meta   []string
	bytes  []byte
}

func readGolden(t *testing.T) []vector {
	t.Helper()
	f, err := os.Open("testdata/golden.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var vs []vector
	var cur *vector
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, val, ok := strings.Cut(line, ": ")
		if !ok {
			key, val = strings.TrimSuffix(line, ":"), ""
		}
		switch key {
		case "name":
			vs = append(vs, vector{name: val, fields: map[string]string{}})
			cur = &vs[len(vs)-1]
		case "hex":
			b, err := hex.DecodeString(strings.ReplaceAll(val, " ", ""))
			if err != nil {
				t.Fatalf("%s: %v", cur.name, err)
			}
			cur.bytes = append(cur.bytes, b...)
		case "meta":
			cur.meta = append(cur.meta, val)
		default:
			cur.fields[key] = val
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(vs) < 10 {
		t.Fatalf("golden.txt holds %d vectors, want at least 10", len(vs))
	}
	return vs
}

func kindByName(t *testing.T, s string) Kind {
	for k := KindRequest; k != 0; k++ {
		if k.String() == s {
			return k
		}
	}
	t.Fatalf("unknown kind %q", s)
	return 0
}

func num(t *testing.T, s string) uint64 {
	if s == "" {
		return 0
	}
	n, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// encode builds a vector's frame from its fields with this package's encoders.
func (v *vector) encode(t *testing.T) []byte {
	f := v.fields
	k := kindByName(t, f["kind"])
	if b := v.encodeStream(t, k); b != nil {
		return b
	}
	switch k {
	case KindError:
		var flags Flags
		if f["flags"] == "Unprocessed" {
			flags = FlagUnprocessed
		}
		return AppendError(nil, uint32(num(t, f["id"])), flags, Code(num(t, f["code"])), f["message"])
	case KindGoAway:
		return AppendGoAway(nil, uint32(num(t, f["last"])), Code(num(t, f["code"])), f["message"])
	case KindCancel:
		return AppendCancel(nil, uint32(num(t, f["id"])))
	case KindUnsubscribe:
		return AppendUnsubscribe(nil, uint32(num(t, f["id"])), Code(num(t, f["code"])), f["message"])
	case KindPing:
		return AppendPing(nil, []byte(f["payload"]))
	case KindHello:
		method, takes := v.handshakeMeta()
		return AppendHello(nil, method, []byte(f["payload"]), takes...)
	case KindWelcome:
		_, takes := v.handshakeMeta()
		return AppendWelcome(nil, f["payload"], takes...)
	case KindPong:
		return AppendPong(nil, []byte(f["payload"]))
	case KindSubscribe:
		_, takes := v.handshakeMeta()
		return AppendSubscribe(nil, uint32(num(t, f["id"])), f["route"], takes...)
	}
	var md Metadata
	for _, m := range v.meta {
		key, val, _ := strings.Cut(m, "=")
		md = AppendMetadata(md, key, []byte(val))
	}
	codec := CodecRaw
	if f["codec"] == "json" {
		codec = CodecJSON
	}
	h := Header{Kind: k, Codec: codec, ID: uint32(num(t, f["id"])), Deadline: uint32(num(t, f["deadline"]))}
	if c, ok := ParseCompression(f["flags"]); ok {
		h.Flags = h.Flags.WithCompression(c)
	}
	return AppendFrame(nil, h, f["route"], md, v.payload(t))
}

// payload is the vector's payload: its payloadhex in hex, else its payload.
func (v *vector) payload(t *testing.T) []byte {
	x, ok := v.fields["payloadhex"]
	if !ok {
		return []byte(v.fields["payload"])
	}
	b, err := hex.DecodeString(strings.ReplaceAll(x, " ", ""))
	if err != nil {
		t.Fatalf("%s: payloadhex: %v", v.name, err)
	}
	return b
}

// handshakeMeta returns what a Hello's or Welcome's metadata says: the
// authentication method and the compressions its sender takes.
func (v *vector) handshakeMeta() (method string, takes []Compression) {
	for _, m := range v.meta {
		switch key, val, _ := strings.Cut(m, "="); key {
		case MetaAuthMethod:
			method = val
		case MetaCompression:
			takes = ParseCompressionList([]byte(val))
		}
	}
	return method, takes
}

// TestGolden decodes every golden frame, checks its fields, and re-encodes it.
func TestGolden(t *testing.T) {
	for _, v := range readGolden(t) {
		t.Run(v.name, func(t *testing.T) {
			if got := v.encode(t); string(got) != string(v.bytes) {
				t.Errorf("encoded\n got % x\nwant % x", got, v.bytes)
			}
			fr, n, err := Decode(v.bytes, nil)
			if err != nil || n != len(v.bytes) {
				t.Fatalf("Decode = n %d, err %v; want n %d", n, err, len(v.bytes))
			}
			f := v.fields
			if want := kindByName(t, f["kind"]); fr.Kind != want {
				t.Errorf("kind %v, want %v", fr.Kind, want)
			}
			if want := uint32(num(t, f["id"])); fr.ID != want {
				t.Errorf("id %d, want %d", fr.ID, want)
			}
			if string(fr.Route) != f["route"] {
				t.Errorf("route %q, want %q", fr.Route, f["route"])
			}
			if want := uint32(num(t, f["deadline"])); fr.Deadline != want {
				t.Errorf("deadline %d, want %d", fr.Deadline, want)
			}
			switch fr.Kind {
			case KindError:
				code, msg := fr.ErrorBody()
				if uint64(code) != num(t, f["code"]) || string(msg) != f["message"] {
					t.Errorf("error body %d %q", code, msg)
				}
				if (fr.Flags&FlagUnprocessed != 0) != (f["flags"] == "Unprocessed") {
					t.Errorf("flags %v", fr.Flags)
				}
			case KindGoAway:
				last, code, msg := fr.GoAwayBody()
				if uint64(last) != num(t, f["last"]) || uint64(code) != num(t, f["code"]) || string(msg) != f["message"] {
					t.Errorf("go-away body %d %d %q", last, code, msg)
				}
			case KindUnsubscribe:
				code, msg := fr.UnsubscribeBody()
				if uint64(code) != num(t, f["code"]) || string(msg) != f["message"] {
					t.Errorf("unsubscribe body %d %q", code, msg)
				}
			case KindStreamOpen, KindStreamCredit, KindStreamReset:
				v.checkStream(t, &fr)
			default:
				if want := v.payload(t); string(fr.Payload) != string(want) {
					t.Errorf("payload %q, want %q", fr.Payload, want)
				}
			}
			if c, _ := ParseCompression(f["flags"]); fr.Kind != KindError && fr.Flags.Compression() != c {
				t.Errorf("compression %v, want %v", fr.Flags.Compression(), c)
			}
			if want, ok := f["expands"]; ok {
				zr, err := gzip.NewReader(bytes.NewReader(fr.Payload))
				if err != nil {
					t.Fatal(err)
				}
				if got, err := io.ReadAll(zr); err != nil || string(got) != want {
					t.Errorf("payload expands to %q, %v; want %q", got, err, want)
				}
			}
			if fr.Metadata.Len() != len(v.meta) {
				t.Errorf("metadata holds %d entries, want %d", fr.Metadata.Len(), len(v.meta))
			}
			for _, m := range v.meta {
				key, val, _ := strings.Cut(m, "=")
				if got, ok := fr.Metadata.Get(key); !ok || string(got) != val {
					t.Errorf("metadata %q = %q, %v; want %q", key, got, ok, val)
				}
			}
		})
	}
}

// TestProtocolDocExamples keeps the byte examples in docs/protocol.md and the
// golden vectors one and the same set, so the page cannot drift from the code.
func TestProtocolDocExamples(t *testing.T) {
	doc, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	_, examples, ok := strings.Cut(string(doc), "## Examples as bytes")
	if !ok {
		t.Fatal("docs/protocol.md has no section \"Examples as bytes\"")
	}
	onPage := map[string]bool{}
	blocks := strings.Split(examples, "```")
	for i := 1; i < len(blocks); i += 2 {
		b, err := hex.DecodeString(strings.Join(strings.Fields(blocks[i]), ""))
		if err != nil {
			t.Fatalf("example %d is not hex: %v", len(onPage)+1, err)
		}
		onPage[string(b)] = true
	}
	golden := map[string]bool{}
	for _, v := range readGolden(t) {
		golden[string(v.bytes)] = true
		if !onPage[string(v.bytes)] {
			t.Errorf("golden vector %s is missing from docs/protocol.md", v.name)
		}
	}
	for b := range onPage {
		if !golden[b] {
			t.Errorf("example in docs/protocol.md (% x) is not a golden vector", b)
		}
	}
}
