package record

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/proto"
)

// readGolden returns the bytes of testdata/golden.txt, the example
// recording that golden.py computed from docs/recording.md.
func readGolden(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/golden.txt")
	if err != nil {
		t.Fatal(err)
	}
	return hexLines(t, string(b))
}

// hexLines decodes the hex of text, skipping lines that begin with #.
func hexLines(t *testing.T, text string) []byte {
	t.Helper()
	var out []byte
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		b, err := hex.DecodeString(strings.Join(strings.Fields(line), ""))
		if err != nil {
			t.Fatalf("not hex: %q: %v", line, err)
		}
		out = append(out, b...)
	}
	return out
}

// golden is the example recording as this package's encoders write it.
func golden(t *testing.T) []byte {
	t.Helper()
	h := Header{Version: FormatVersion, Start: time.Date(2026, 12, 6, 15, 0, 0, 0, time.UTC), Source: "proxy",
		Server: "127.0.0.1:7070", MaxFrame: proto.DefaultMaxFrameSize,
		Options: Options{MaxBytes: DefaultMaxBytes, Sample: 1, Answers: true, Redact: []Redaction{{Route: "User/*", Action: Drop}}}}
	b, err := appendFileHeader(nil, &h)
	if err != nil {
		t.Fatal(err)
	}
	b = appendOpen(b, 1000, 1, "127.0.0.1:50000")
	req := proto.Header{Kind: proto.KindRequest, Codec: proto.CodecJSON, ID: 1, Deadline: 1000}
	b = appendFrame(b, 1500*time.Microsecond, 1, false, Keep, 13, req, []byte("Math/Sum"), nil, []byte(`{"a":1,"b":2}`))
	resp := proto.Header{Kind: proto.KindResponse, Codec: proto.CodecJSON, ID: 1}
	b = appendFrame(b, 1600*time.Microsecond, 1, true, Keep, 1, resp, nil, nil, []byte("3"))
	login := proto.Header{Kind: proto.KindRequest, Codec: proto.CodecJSON, ID: 2}
	b = appendFrame(b, 1700*time.Microsecond, 1, false, Drop, 17, login, []byte("User/Login"), nil, nil)
	b = appendClose(b, 2*time.Millisecond, 1)
	return appendEnd(b, 2*time.Millisecond, &Stats{Frames: 3, Calls: 2, Conns: 1, Ended: EndStopped})
}

// TestGolden: the encoders write the example recording byte for byte, and
// the Reader reads back what docs/recording.md says it holds.
func TestGolden(t *testing.T) {
	want := readGolden(t)
	if got := golden(t); !bytes.Equal(got, want) {
		t.Fatalf("the encoders write\n% x\nwant (testdata/golden.txt)\n% x", got, want)
	}
	r, err := NewReader(bytes.NewReader(want))
	if err != nil {
		t.Fatal(err)
	}
	h := r.Header()
	if h.Version != 1 || h.Source != "proxy" || h.Server != "127.0.0.1:7070" || !h.Start.Equal(time.Date(2026, 12, 6, 15, 0, 0, 0, time.UTC)) ||
		h.MaxFrame != 4<<20 || !h.Options.Answers || len(h.Options.Redact) != 1 || h.Options.Redact[0].Action != Drop {
		t.Errorf("header %+v", h)
	}
	type entry struct {
		typ      EntryType
		at       time.Duration
		out      bool
		kind     proto.Kind
		route    string
		payload  string
		n        int
		redacted Action
		remote   string
	}
	wantEntries := []entry{
		{typ: EntryOpen, at: 1000, remote: "127.0.0.1:50000"},
		{typ: EntryFrame, at: 1500 * time.Microsecond, kind: proto.KindRequest, route: "Math/Sum", payload: `{"a":1,"b":2}`, n: 13},
		{typ: EntryFrame, at: 1600 * time.Microsecond, out: true, kind: proto.KindResponse, payload: "3", n: 1},
		{typ: EntryFrame, at: 1700 * time.Microsecond, kind: proto.KindRequest, route: "User/Login", n: 17, redacted: Drop},
		{typ: EntryClose, at: 2 * time.Millisecond},
	}
	for i, w := range wantEntries {
		e, err := r.Next()
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		got := entry{typ: e.Type, at: e.At, out: e.Out, kind: e.Frame.Kind, route: string(e.Frame.Route), payload: string(e.Frame.Payload),
			n: e.PayloadLen, redacted: e.Redacted, remote: e.Remote}
		if got != w || e.Conn != 1 {
			t.Errorf("entry %d: %+v conn %d, want %+v conn 1", i, got, e.Conn, w)
		}
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last entry: %v, want io.EOF", err)
	}
	if s, at, ok := r.End(); !ok || at != 2*time.Millisecond || s != (Stats{Frames: 3, Calls: 2, Conns: 1, Ended: EndStopped, Bytes: int64(len(want))}) {
		t.Errorf("end %+v %v", s, ok)
	}
}

// TestRecordingDocExample: the hex blocks of docs/recording.md's example,
// one after the other, are testdata/golden.txt.
func TestRecordingDocExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/recording.md")
	if err != nil {
		t.Fatal(err)
	}
	_, example, ok := strings.Cut(string(doc), "## Example")
	if !ok {
		t.Fatal(`docs/recording.md has no section "Example"`)
	}
	example, _, _ = strings.Cut(example, "\n## ")
	var onPage []byte
	blocks := strings.Split(example, "```")
	for i := 1; i < len(blocks); i += 2 {
		onPage = append(onPage, hexLines(t, blocks[i])...)
	}
	if want := readGolden(t); !bytes.Equal(onPage, want) {
		t.Errorf("docs/recording.md's example is\n% x\nwant testdata/golden.txt's\n% x", onPage, want)
	}
}
