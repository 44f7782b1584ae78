package record

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rpcd/rpcd/proto"
)

// mixed records a known mix: 3 connections, 100 calls, 60 % Math/Sum, 30 %
// Bench/EchoPacket, 10 % Log/Write (OneWays), with answers; a third of the
// EchoPackets fail.
func mixed(t *testing.T) []byte {
	b, _ := record(t, Options{Answers: true, Server: "127.0.0.1:7070", Source: "proxy"}, func(r *Recorder) {
		for conn := uint64(1); conn <= 3; conn++ {
			r.TapOpen(conn, addr)
		}
		for i := 0; i < 100; i++ {
			conn, id := uint64(i%3+1), uint32(i+1)
			switch {
			case i%10 < 6:
				r.TapFrame(conn, false, request(id, "Math/Sum", `{"a":1,"b":2}`))
				r.TapFrame(conn, true, response(id, "3"))
			case i%10 < 9:
				r.TapFrame(conn, false, request(id, "Bench/EchoPacket", strings.Repeat("x", i)))
				if i%5 == 1 {
					r.TapFrame(conn, true, proto.AppendError(nil, id, 0, proto.CodeInternal, "no"))
				} else {
					r.TapFrame(conn, true, response(id, strings.Repeat("x", i)))
				}
			default:
				r.TapFrame(conn, false, frameOf(proto.KindOneWay, id, "Log/Write", "l"))
			}
		}
		r.TapClose(2)
	})
	return b
}

func TestSummarize(t *testing.T) {
	r, err := NewReader(bytes.NewReader(mixed(t)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Summarize(r)
	if err != nil {
		t.Fatal(err)
	}
	if s.Conns != 3 || s.PeakConns != 3 || s.Calls != 100 || s.Frames != 190 || s.Answers != 90 || s.Ended != EndStopped || s.CutShort || s.Lost != 0 {
		t.Errorf("summary %+v", s)
	}
	want := []struct {
		route  string
		kind   proto.Kind
		calls  int64
		errors int64
	}{{"Math/Sum", proto.KindRequest, 60, 0}, {"Bench/EchoPacket", proto.KindRequest, 30, 10}, {"Log/Write", proto.KindOneWay, 10, 0}}
	if len(s.Routes) != len(want) {
		t.Fatalf("routes %+v", s.Routes)
	}
	for i, w := range want {
		got := s.Routes[i]
		if got.Route != w.route || got.Kind != w.kind || got.Calls != w.calls || got.Errors != w.errors || got.Share != float64(w.calls)/100 {
			t.Errorf("route %d: %+v, want %+v", i, got, w)
		}
	}
	if p := s.Routes[0].Payload; p.Min != 13 || p.Max != 13 || p.Count != 60 {
		t.Errorf("Math/Sum's payloads %+v", p)
	}
	if p := s.Routes[1].Payload; p.Min != 6 || p.Max != 98 {
		t.Errorf("Bench/EchoPacket's payloads %+v", p)
	}
	var text bytes.Buffer
	if err := s.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"recording of 127.0.0.1:7070 by the proxy", "3 connections", "100 calls", "Math/Sum", "60.0 %", "Bench/EchoPacket"} {
		if !strings.Contains(text.String(), line) {
			t.Errorf("the text does not say %q:\n%s", line, text.String())
		}
	}
}

// TestSummarizeCutShort: a recording without its end record is summarised
// as far as it goes.
func TestSummarizeCutShort(t *testing.T) {
	b := mixed(t)
	cut := boundaries(b)
	r, err := NewReader(bytes.NewReader(b[:cut[len(cut)-3]])) // without the last close and the end
	if err != nil {
		t.Fatal(err)
	}
	s, err := Summarize(r)
	if err != nil || !s.CutShort || s.Calls != 100 || s.Ended != EndNone {
		t.Errorf("cut short: %+v, %v", s, err)
	}
}

// TestFilter: a route dropped with its answers; metadata set and replaced
// on every call; the rest as it was.
func TestFilter(t *testing.T) {
	withMeta := func(id uint32, route, backend string) []byte {
		md := proto.AppendMetadata(nil, "backend", []byte(backend))
		md = proto.AppendMetadata(md, "tenant", []byte("acme"))
		return proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: id}, route, md, []byte("p"))
	}
	src, _ := record(t, Options{Answers: true}, func(r *Recorder) {
		r.TapOpen(1, addr)
		r.TapFrame(1, false, withMeta(1, "Sys/Ping", "10.0.0.1:80"))
		r.TapFrame(1, true, response(1, "pong"))
		r.TapFrame(1, false, withMeta(2, "Math/Sum", "10.0.0.1:80"))
		r.TapFrame(1, false, withMeta(3, "Math/Sum", "10.0.0.9:80"))
		r.TapFrame(1, true, response(2, "3"))
		r.TapClose(1)
	})
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.rec"), filepath.Join(dir, "out.rec")
	if err := os.WriteFile(in, src, 0o600); err != nil {
		t.Fatal(err)
	}
	f := Filter{Drop: []string{"Sys/*"}, Set: []MetaValue{{"tenant", "test"}, {"replay", "1"}}, Replace: []MetaReplace{{"backend", "10.0.0.1:80", "127.0.0.1:7070"}}}
	s, err := FilterFile(out, in, f)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	got, end := entries(t, b)
	var lines []string
	for _, e := range got {
		lines = append(lines, fmt.Sprintf("%v %v %d %s", e.typ, e.kind, e.id, e.route))
	}
	want := []string{"open Kind(0x0) 0 ", "frame Request 2 Math/Sum", "frame Request 3 Math/Sum", "frame Response 2 ", "close Kind(0x0) 0 "}
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Errorf("filtered:\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if s.Frames != 3 || s.Calls != 2 || s.Conns != 1 || end.Frames != 3 || end.Calls != 2 || s.Bytes != int64(len(b)) {
		t.Errorf("stats %+v, end record %+v, file %d bytes", s, end, len(b))
	}
	r, _ := NewReader(bytes.NewReader(b))
	r.Next()
	for _, backend := range []string{"127.0.0.1:7070", "10.0.0.9:80"} {
		e, _ := r.Next()
		md := e.Frame.Metadata
		v, _ := md.Get("backend")
		tenant, _ := md.Get("tenant")
		replay, _ := md.Get("replay")
		if string(v) != backend || string(tenant) != "test" || string(replay) != "1" || md.Len() != 3 {
			t.Errorf("call %d's metadata: backend %q tenant %q replay %q (%d entries)", e.Frame.ID, v, tenant, replay, md.Len())
		}
	}
	if _, err := FilterFile(out, in, f); !errors.Is(err, os.ErrExist) {
		t.Errorf("filtering over an existing file: %v", err)
	}
	if _, err := ParseMetaReplace("backend=a=>b"); err != nil {
		t.Error(err)
	}
	if _, err := ParseMetaReplace("backend=a"); err == nil {
		t.Error("ParseMetaReplace took a pair without =>")
	}
}
