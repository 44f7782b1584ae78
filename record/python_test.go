package record

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rpcd/rpcd/proto"
)

// TestPythonReader: testdata/read.py, a reader written from
// docs/recording.md alone, reads the golden file and a recording the
// Recorder wrote (calls, answers, redaction, metadata, streams) entry for
// entry as the Reader does. Skipped without python3.
func TestPythonReader(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not on PATH; skipping the reader written in Python")
	}
	md := proto.AppendMetadata(nil, "tenant", []byte("acme"))
	made, _ := record(t, Options{Answers: true, Redact: []Redaction{{Route: "Card/*", Action: Replace, With: []byte("x")}}}, func(r *Recorder) {
		r.TapOpen(1, addr)
		r.TapOpen(2, nil)
		r.TapFrame(1, false, proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, Codec: proto.CodecJSON, ID: 1, Deadline: 50}, "Math/Sum", md, []byte(`{"a":1}`)))
		r.TapFrame(2, false, request(1, "Card/Pay", "4111"))
		r.TapFrame(1, true, response(1, "1"))
		r.TapFrame(2, true, proto.AppendError(nil, 1, proto.FlagUnprocessed, proto.CodeNotFound, "no"))
		r.TapFrame(2, false, frameOf(proto.KindStreamOpen, 3, "Up/Load", "\x00\x00\x01\x00"))
		r.TapFrame(2, false, frameOf(proto.KindStreamData, 3, "", "chunk"))
		r.TapClose(1)
	})
	dir := t.TempDir()
	for name, b := range map[string][]byte{"golden": readGolden(t), "made": made} {
		path := filepath.Join(dir, name+".rec")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(py, "testdata/read.py", path).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: read.py: %v\n%s", name, err, out)
		}
		if want := goLines(t, b); string(out) != want {
			t.Errorf("%s: read.py says\n%s\nthe Reader says\n%s", name, out, want)
		}
	}
}

// goLines is what read.py prints, from the Reader.
func goLines(t *testing.T, b []byte) string {
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	dash := func(b []byte) string {
		if len(b) == 0 {
			return "-"
		}
		return hex.EncodeToString(b)
	}
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			s, _, _ := r.End()
			fmt.Fprintf(&sb, "end %d %d %d %d %d\n", s.Frames, s.Calls, s.Conns, s.Lost, s.Ended)
			return sb.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		route, out := string(e.Frame.Route), 0
		if e.Type == EntryOpen {
			route = e.Remote
		}
		if route == "" {
			route = "-"
		}
		if e.Out {
			out = 1
		}
		fmt.Fprintf(&sb, "%v %d %d %d %d %d %s %d %d %s %s\n", e.Type, e.At, e.Conn, out, e.Frame.Kind, e.Frame.ID, route,
			e.PayloadLen, e.Redacted, dash(e.Frame.Payload), dash(e.Frame.Metadata))
	}
}
