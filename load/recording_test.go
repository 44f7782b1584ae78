package load

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"testing"

	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/record"
)

// TestReadRecording: a recording's Requests, OneWays and Publishes become
// the calls a replay makes, with their connection, route, kind, codec,
// metadata, deadline and payload, each Request with its answer (a
// Response's payload, an Error's code and message); a dropped payload is
// as many zero bytes; the other frames clients sent are counted by kind;
// the answers and frames the server sent otherwise are not calls.
func TestReadRecording(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.rec")
	rec, err := record.Create(path, record.Options{Answers: true, Source: "server", Server: "127.0.0.1:1",
		Redact: []record.Redaction{{Route: "S/Secret", Action: record.Drop}}})
	if err != nil {
		t.Fatal(err)
	}
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}
	md := proto.AppendMetadata(nil, "tenant", []byte("t1"))
	req := func(id uint32, route string, codec proto.Codec, deadline uint32, md proto.Metadata, payload string) []byte {
		return proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, Codec: codec, ID: id, Deadline: deadline}, route, md, []byte(payload))
	}
	for _, conn := range []uint64{1, 2} {
		if !rec.TapOpen(conn, addr) {
			t.Fatal("the recorder refused a connection")
		}
	}
	rec.TapFrame(1, false, req(1, "A/Get", proto.CodecJSON, 1500, md, `{"id":1}`))
	rec.TapFrame(2, false, req(1, "A/Get", proto.CodecRaw, 0, nil, "two"))
	rec.TapFrame(1, false, req(2, "S/Secret", proto.CodecRaw, 0, nil, "hush"))
	rec.TapFrame(1, false, proto.AppendFrame(nil, proto.Header{Kind: proto.KindOneWay, Codec: proto.CodecJSON, ID: 3}, "A/Note", nil, []byte(`"n"`)))
	rec.TapFrame(2, false, proto.AppendPublish(nil, "a.b", proto.CodecJSON, []byte(`{"p":1}`)))
	rec.TapFrame(2, false, proto.AppendSubscribe(nil, 7, "a.>"))
	rec.TapFrame(1, false, proto.AppendCancel(nil, 2))
	rec.TapFrame(2, true, proto.AppendError(nil, 1, 0, proto.CodeNotFound, "no two"))
	rec.TapFrame(1, true, proto.AppendFrame(nil, proto.Header{Kind: proto.KindResponse, Codec: proto.CodecJSON, ID: 1}, "", nil, []byte(`{"v":1}`)))
	rec.TapFrame(1, true, proto.AppendFrame(nil, proto.Header{Kind: proto.KindResponse, ID: 2}, "", nil, []byte("secret")))
	rec.TapFrame(2, true, proto.AppendMessage(nil, 7, []byte("a.b"), proto.CodecJSON, []byte(`{"p":1}`)))
	rec.TapClose(1)
	rec.TapClose(2)
	if _, err := rec.Stop(); err != nil {
		t.Fatal(err)
	}

	r, err := OpenRecording(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "r.rec" || r.CutShort || fmt.Sprint(r.Skipped) != "map[Cancel:1 Subscribe:1]" {
		t.Errorf("name %q, cut short %v, skipped %v; want r.rec, whole, a Cancel and a Subscribe", r.Name, r.CutShort, r.Skipped)
	}
	want := []string{
		`1 Request A/Get json tenant=t1 1.5s {"id":1} -> answered ok {"v":1}`,
		`2 Request A/Get raw  0s two -> answered not found no two`,
		"1 Request S/Secret raw  0s \x00\x00\x00\x00 -> answered ok code only",
		`1 OneWay A/Note json  0s "n" -> `,
		`2 Publish a.b json  0s {"p":1} -> `,
	}
	if len(r.Calls) != len(want) {
		t.Fatalf("%d calls, want %d: %+v", len(r.Calls), len(want), r.Calls)
	}
	for i, c := range r.Calls {
		var meta string
		c.Metadata.Range(func(k, v []byte) bool { meta += string(k) + "=" + string(v); return true })
		answer := ""
		switch {
		case c.AnswerCodeOnly:
			answer = "answered " + c.Code.String() + " code only"
		case c.Answered:
			answer = "answered " + c.Code.String() + " " + string(c.Answer)
		}
		got := fmt.Sprintf("%d %v %s %v %s %v %s -> %s", c.Conn, c.Kind, c.Route, c.Codec, meta, c.Deadline, c.Payload, answer)
		if got != want[i] {
			t.Errorf("call %d:\n got %q\nwant %q", i, got, want[i])
		}
		if i > 0 && c.At < r.Calls[i-1].At {
			t.Errorf("call %d at %v, before the call before it (%v)", i, c.At, r.Calls[i-1].At)
		}
	}
	if r.Length < r.Calls[len(r.Calls)-1].At || r.Length <= 0 {
		t.Errorf("length %v, the last call at %v", r.Length, r.Calls[len(r.Calls)-1].At)
	}
}

// TestReadRecordingBadFiles: a recording cut short is read as far as it
// goes; a damaged one is the reader's error.
func TestReadRecordingBadFiles(t *testing.T) {
	var b bytes.Buffer
	rec, err := record.New(&b, record.Options{Source: "server"})
	if err != nil {
		t.Fatal(err)
	}
	rec.TapOpen(1, nil)
	rec.TapFrame(1, false, proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, "A/Get", nil, []byte("x")))
	if _, err := rec.Stop(); err != nil {
		t.Fatal(err)
	}
	whole := b.Bytes()
	// The file without its end record: the longest prefix that reads as
	// cut short between two records.
	var cut []byte
	for n := len(whole) - 1; n > 0; n-- {
		rd, err := record.NewReader(bytes.NewReader(whole[:n]))
		if err != nil {
			continue
		}
		for err == nil {
			_, err = rd.Next()
		}
		if errors.Is(err, record.ErrCutShort) {
			cut = whole[:n]
			break
		}
	}
	if cut == nil {
		t.Fatal("no prefix of the file reads as cut short")
	}
	rd, err := record.NewReader(bytes.NewReader(cut))
	if err != nil {
		t.Fatal(err)
	}
	r, err := ReadRecording(rd)
	if err != nil || !r.CutShort || len(r.Calls) != 1 {
		t.Errorf("cut short: %+v, %v; want its one call, CutShort", r, err)
	}

	bad := bytes.Clone(whole)
	bad[len(bad)-3] ^= 0xff // in the end record
	rd, err = record.NewReader(bytes.NewReader(bad))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRecording(rd); !errors.Is(err, record.ErrBadFile) {
		t.Errorf("a corrupted end record: %v, want record.ErrBadFile", err)
	}
}
