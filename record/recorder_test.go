package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/proto"
)

// tap is handler/transport's Tap, as issue 37's contract gives it: the
// Recorder keeps its method set exact.
type tap interface {
	TapOpen(conn uint64, remote net.Addr) bool
	TapFrame(conn uint64, out bool, frame []byte)
	TapClose(conn uint64)
}

var _ tap = (*Recorder)(nil)

// rec is an entry as a test compares it.
type rec struct {
	typ     EntryType
	conn    uint64
	out     bool
	kind    proto.Kind
	id      uint32
	route   string
	payload string
	n       int
	red     Action
	flags   proto.Flags
}

// entries reads every entry of the recording b, failing the test on an
// error other than the io.EOF after the end record.
func entries(t *testing.T, b []byte) ([]rec, Stats) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var out []rec
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %d entries: %v", len(out), err)
		}
		out = append(out, rec{typ: e.Type, conn: e.Conn, out: e.Out, kind: e.Frame.Kind, id: e.Frame.ID, route: string(e.Frame.Route),
			payload: string(e.Frame.Payload), n: e.PayloadLen, red: e.Redacted, flags: e.Frame.Flags})
	}
	s, _, _ := r.End()
	return out, s
}

// frames of the tests.
func request(id uint32, route, payload string) []byte {
	return proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, Codec: proto.CodecJSON, ID: id}, route, nil, []byte(payload))
}

func response(id uint32, payload string) []byte {
	return proto.AppendFrame(nil, proto.Header{Kind: proto.KindResponse, Codec: proto.CodecJSON, ID: id}, "", nil, []byte(payload))
}

func frameOf(k proto.Kind, id uint32, route, payload string) []byte {
	return proto.AppendFrame(nil, proto.Header{Kind: k, ID: id}, route, nil, []byte(payload))
}

// record runs fn on a new Recorder with o, stops it and returns the file.
func record(t *testing.T, o Options, fn func(r *Recorder)) ([]byte, Stats) {
	t.Helper()
	var buf bytes.Buffer
	r, err := New(&buf, o)
	if err != nil {
		t.Fatal(err)
	}
	fn(r)
	s, err := r.Stop()
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), s
}

var addr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 50000}

// TestRecorderKinds: what is recorded and what is not, with answers and
// without (docs/recording.md, "What is recorded").
func TestRecorderKinds(t *testing.T) {
	feed := func(r *Recorder) {
		r.TapOpen(1, addr)
		r.TapFrame(1, false, proto.AppendHello(nil, "token", []byte("s3cr3t")))
		r.TapFrame(1, true, proto.AppendWelcome(nil, "alice"))
		r.TapFrame(1, false, proto.AppendPing(nil, []byte("12345678")))
		r.TapFrame(1, true, proto.AppendPong(nil, []byte("12345678")))
		r.TapFrame(1, false, request(1, "Math/Sum", `{"a":1,"b":2}`))
		r.TapFrame(1, false, proto.AppendCancel(nil, 1))
		r.TapFrame(1, true, response(1, "3"))
		r.TapFrame(1, false, frameOf(proto.KindOneWay, 2, "Log/Write", `"x"`))
		r.TapFrame(1, true, frameOf(proto.KindRequest, 1, "Client/Double", "21")) // the server's call
		r.TapFrame(1, false, response(1, "42"))                                   // the client's answer to it
		r.TapFrame(1, true, proto.AppendGoAway(nil, 2, proto.CodeUnavailable, "draining"))
		r.TapClose(1)
	}
	calls := []rec{
		{typ: EntryOpen, conn: 1},
		{typ: EntryFrame, conn: 1, kind: proto.KindRequest, id: 1, route: "Math/Sum", payload: `{"a":1,"b":2}`, n: 13},
		{typ: EntryFrame, conn: 1, kind: proto.KindCancel, id: 1},
	}
	answer := rec{typ: EntryFrame, conn: 1, out: true, kind: proto.KindResponse, id: 1, payload: "3", n: 1}
	rest := []rec{
		{typ: EntryFrame, conn: 1, kind: proto.KindOneWay, id: 2, route: "Log/Write", payload: `"x"`, n: 3},
		{typ: EntryClose, conn: 1},
	}
	for _, answers := range []bool{false, true} {
		b, s := record(t, Options{Answers: answers}, feed)
		got, end := entries(t, b)
		want := append(append([]rec{}, calls...), rest...)
		if answers {
			want = append(append(append([]rec{}, calls...), answer), rest...)
		}
		if !equalRecs(got, want) {
			t.Errorf("answers %v: got\n%+v\nwant\n%+v", answers, got, want)
		}
		if s.Calls != 2 || s.Conns != 1 || s.Frames != int64(len(want)-2) || s.Ended != EndStopped || s.Lost != 0 || s.Bytes != int64(len(b)) {
			t.Errorf("answers %v: stats %+v", answers, s)
		}
		if s.Bytes = end.Bytes; end != s {
			t.Errorf("answers %v: end record %+v, Stop said %+v", answers, end, s)
		}
		if bytes.Contains(b, []byte("s3cr3t")) || bytes.Contains(b, []byte("alice")) {
			t.Errorf("answers %v: the Hello's credentials or the Welcome reached the file", answers)
		}
	}
}

func equalRecs(a, b []rec) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRecorderRoutes: the route filter takes calls, streams and
// subscriptions by their routes; what belongs to one not taken is not
// recorded.
func TestRecorderRoutes(t *testing.T) {
	b, s := record(t, Options{Routes: []string{"Math/*", "orders.*"}, Answers: true}, func(r *Recorder) {
		r.TapOpen(7, addr)
		r.TapFrame(7, false, request(1, "Math/Sum", "{}"))
		r.TapFrame(7, false, request(2, "Bench/NoArg", ""))
		r.TapFrame(7, true, response(2, "42"))
		r.TapFrame(7, true, response(1, "0"))
		r.TapFrame(7, false, proto.AppendCancel(nil, 2))
		r.TapFrame(7, false, frameOf(proto.KindSubscribe, 3, "orders.>", ""))
		r.TapFrame(7, false, frameOf(proto.KindSubscribe, 4, "users.>", ""))
		r.TapFrame(7, true, proto.AppendFrame(nil, proto.Header{Kind: proto.KindMessage, ID: 3}, "orders.eu", nil, []byte("m")))
		r.TapFrame(7, true, proto.AppendFrame(nil, proto.Header{Kind: proto.KindMessage, ID: 4}, "users.eu", nil, []byte("u")))
		r.TapFrame(7, false, frameOf(proto.KindUnsubscribe, 3, "", ""))
		r.TapFrame(7, true, proto.AppendFrame(nil, proto.Header{Kind: proto.KindMessage, ID: 3}, "orders.eu", nil, []byte("late")))
		r.TapFrame(7, false, frameOf(proto.KindStreamOpen, 5, "Math/Stream", "\x00\x04\x00\x00"))
		r.TapFrame(7, false, frameOf(proto.KindStreamOpen, 7, "Bench/StreamSink", "\x00\x04\x00\x00"))
		r.TapFrame(7, true, frameOf(proto.KindStreamCredit, 5, "", "\x00\x04\x00\x00"))
		r.TapFrame(7, false, frameOf(proto.KindStreamData, 5, "", "abc"))
		r.TapFrame(7, false, frameOf(proto.KindStreamData, 7, "", "xyz"))
		r.TapFrame(7, false, frameOf(proto.KindStreamEnd, 5, "", ""))
		r.TapFrame(7, true, frameOf(proto.KindStreamEnd, 5, "", ""))
		r.TapFrame(7, false, frameOf(proto.KindStreamData, 5, "", "after its end"))
	})
	got, _ := entries(t, b)
	var kinds []string
	for _, e := range got[1 : len(got)-1] {
		kinds = append(kinds, e.kind.String()+"/"+e.route+"/"+e.payload)
	}
	want := []string{"Request/Math/Sum/{}", "Response//0", "Subscribe/orders.>/", "Message/orders.eu/m", "Unsubscribe//",
		"StreamOpen/Math/Stream/\x00\x04\x00\x00", "StreamCredit//\x00\x04\x00\x00", "StreamData//abc", "StreamEnd//", "StreamEnd//"}
	if len(kinds) != len(want) {
		t.Fatalf("recorded %q, want %q", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Errorf("frame %d: %q, want %q", i, kinds[i], want[i])
		}
	}
	if s.Calls != 3 {
		t.Errorf("%d calls, want 3 (a Request, a Subscribe, a StreamOpen)", s.Calls)
	}
}

// TestRecorderRedact: payloads dropped or replaced by the call's route,
// the answers' by their call's; an Error keeps its code; the length is the
// original's.
func TestRecorderRedact(t *testing.T) {
	o := Options{Answers: true, Redact: []Redaction{
		{Route: "User/Login", Action: Keep}, {Route: "User/*", Action: Drop}, {Route: "Card/*", Action: Replace, With: []byte(`"xxx"`)}}}
	b, _ := record(t, o, func(r *Recorder) {
		r.TapOpen(1, nil)
		r.TapFrame(1, false, request(1, "User/Get", `{"id":"secret-user"}`))
		r.TapFrame(1, true, response(1, `{"name":"secret-name"}`))
		r.TapFrame(1, false, request(2, "Card/Pay", `"4111111111111111"`))
		r.TapFrame(1, true, proto.AppendError(nil, 2, 0, proto.CodeInvalidArgument, "card 4111111111111111 refused"))
		r.TapFrame(1, false, request(3, "User/Login", `"kept"`))
	})
	for _, secret := range []string{"secret", "4111"} {
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("%q reached the file", secret)
		}
	}
	got, _ := entries(t, b)
	want := []rec{
		{typ: EntryOpen, conn: 1},
		{typ: EntryFrame, conn: 1, kind: proto.KindRequest, id: 1, route: "User/Get", n: 20, red: Drop},
		{typ: EntryFrame, conn: 1, out: true, kind: proto.KindResponse, id: 1, n: 22, red: Drop},
		{typ: EntryFrame, conn: 1, kind: proto.KindRequest, id: 2, route: "Card/Pay", payload: `"xxx"`, n: 18, red: Replace},
		{typ: EntryFrame, conn: 1, out: true, kind: proto.KindError, id: 2, payload: "\x00\x03\"xxx\"", n: 31, red: Replace},
		{typ: EntryFrame, conn: 1, kind: proto.KindRequest, id: 3, route: "User/Login", payload: `"kept"`, n: 6},
		{typ: EntryClose, conn: 1},
	}
	if !equalRecs(got, want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
}

// TestRecorderCompressed: a compressed payload is recorded expanded, its
// compression bits cleared; one that does not expand is kept as it came.
func TestRecorderCompressed(t *testing.T) {
	plain := bytes.Repeat([]byte(`{"k":"v"},`), 200)
	z := compression.Append(nil, plain, proto.CompressionGzip)
	good := proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, Flags: proto.Flags(0).WithCompression(proto.CompressionGzip), ID: 1}, "A/B", nil, z)
	bad := proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, Flags: proto.Flags(0).WithCompression(proto.CompressionZstd), ID: 2}, "A/B", nil, []byte("not zstd"))
	b, _ := record(t, Options{}, func(r *Recorder) {
		r.TapOpen(1, nil)
		r.TapFrame(1, false, good)
		r.TapFrame(1, false, bad)
	})
	got, _ := entries(t, b)
	if e := got[1]; e.payload != string(plain) || e.n != len(plain) || e.flags != 0 {
		t.Errorf("gzip payload recorded as %d bytes (length %d) with flags %v, want %d expanded, flags 0", len(e.payload), e.n, e.flags, len(plain))
	}
	if e := got[2]; e.payload != "not zstd" || e.n != 8 || e.flags.Compression() != proto.CompressionZstd {
		t.Errorf("a payload that does not expand recorded as %q (length %d) flags %v", e.payload, e.n, e.flags)
	}
}

// TestSampled: the sample takes connections by their numbers alone, the
// same each time, and about the fraction asked.
func TestSampled(t *testing.T) {
	for _, s := range []float64{0.1, 0.5, 0.9} {
		n := 0
		taken := map[uint64]bool{}
		for conn := uint64(1); conn <= 20000; conn++ {
			if Sampled(conn, s) {
				n++
				taken[conn] = true
			}
		}
		for conn := uint64(20000); conn >= 1; conn-- {
			if Sampled(conn, s) != taken[conn] {
				t.Fatalf("Sampled(%d, %v) changed its mind", conn, s)
			}
		}
		if f := float64(n) / 20000; math.Abs(f-s) > 0.02 {
			t.Errorf("sample %v took %v of 20,000 connections", s, f)
		}
	}
	if !Sampled(12345, 1) || !Sampled(12345, 0) {
		t.Error("a sample of 1 (or 0, the default) leaves a connection out")
	}
	b, s := record(t, Options{Sample: 0.5}, func(r *Recorder) {
		for conn := uint64(1); conn <= 100; conn++ {
			if r.TapOpen(conn, nil) != Sampled(conn, 0.5) {
				t.Fatalf("TapOpen(%d) disagrees with Sampled", conn)
			}
		}
	})
	got, _ := entries(t, b)
	if int64(len(got)/2) != s.Conns || s.Conns < 30 || s.Conns > 70 {
		t.Errorf("%d connections recorded, %d entries, of 100 at 0.5", s.Conns, len(got))
	}
}

// TestOptionsInvalid: options that cannot work are refused by name.
func TestOptionsInvalid(t *testing.T) {
	for _, o := range []Options{{Sample: 1.5}, {Sample: -0.1}, {Sample: math.NaN()}, {Duration: -1}, {MaxBytes: 100},
		{Routes: []string{"a/["}}, {Redact: []Redaction{{Route: "[", Action: Drop}}}, {Redact: []Redaction{{Route: "a", Action: 9}}}} {
		if _, err := New(io.Discard, o); err == nil {
			t.Errorf("New(%+v) took them", o)
		}
	}
}

func TestParseRedaction(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Redaction
	}{
		{"User/*=drop", Redaction{Route: "User/*", Action: Drop}},
		{"A/B=keep", Redaction{Route: "A/B", Action: Keep}},
		{"A/B=replace:x=y", Redaction{Route: "A/B", Action: Replace, With: []byte("x=y")}},
	} {
		got, err := ParseRedaction(c.in)
		if err != nil || got.Route != c.want.Route || got.Action != c.want.Action || string(got.With) != string(c.want.With) {
			t.Errorf("ParseRedaction(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "A/B", "=drop", "A/B=hide", "[=drop"} {
		if _, err := ParseRedaction(bad); err == nil {
			t.Errorf("ParseRedaction(%q) took it", bad)
		}
	}
}

// TestCreate: a new file of mode 0600; an existing one is refused and left
// as it was.
func TestCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.rec")
	r, err := Create(path, Options{Source: "server", Server: "127.0.0.1:7070"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	before, _ := os.ReadFile(path)
	if _, err := Create(path, Options{}); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Create over an existing file: %v, want fs.ErrExist", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("Create changed an existing file")
	}
	rd, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if h := rd.Header(); h.Source != "server" || h.Server != "127.0.0.1:7070" {
		t.Errorf("header %+v", h)
	}
	if _, err := rd.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("an empty recording: %v, want io.EOF", err)
	}
}

// TestRecorderMaxBytes: the recording ends by itself before the file
// passes MaxBytes, whole.
func TestRecorderMaxBytes(t *testing.T) {
	const max = 200 << 10
	var buf bytes.Buffer
	r, err := New(&buf, Options{MaxBytes: max})
	if err != nil {
		t.Fatal(err)
	}
	r.TapOpen(1, nil)
	payload := string(bytes.Repeat([]byte("p"), 1000))
	for i := 1; i <= 1000; i++ {
		select {
		case <-r.Done():
			i = 1000
		default:
			r.TapFrame(1, false, request(uint32(i), "A/B", payload))
			time.Sleep(10 * time.Microsecond) // leave the writer room: this test is not of the queue
		}
	}
	<-r.Done()
	s, err := r.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if s.Ended != EndMaxBytes || buf.Len() > max || s.Bytes != int64(buf.Len()) || buf.Len() < max-2<<10 {
		t.Errorf("ended %v at %d bytes (stats %+v), want max bytes, at most %d", s.Ended, buf.Len(), s, max)
	}
	got, end := entries(t, buf.Bytes())
	if end.Ended != EndMaxBytes || got[len(got)-1].typ != EntryClose || int64(len(got)-2) != end.Frames {
		t.Errorf("end %+v after %d entries", end, len(got))
	}
	r.TapFrame(1, false, request(5000, "A/B", "")) // after the end: nothing, no panic
}

// TestRecorderDuration: the recording ends by itself once its duration
// has passed.
func TestRecorderDuration(t *testing.T) {
	var buf bytes.Buffer
	r, err := New(&buf, Options{Duration: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the recording did not end within 10s of its 1ms")
	}
	if s := r.Stats(); s.Ended != EndDuration {
		t.Errorf("ended %v", s.Ended)
	}
	if r.TapOpen(1, nil) {
		t.Error("TapOpen took a connection after the end")
	}
	if _, end := entries(t, buf.Bytes()); end.Ended != EndDuration {
		t.Errorf("end record says %v", end.Ended)
	}
}

// blocking is a writer that takes the file header, then blocks until
// released.
type blocking struct {
	bytes.Buffer
	release chan struct{}
	writes  int
}

func (b *blocking) Write(p []byte) (int, error) {
	if b.writes++; b.writes > 1 {
		<-b.release
	}
	return b.Buffer.Write(p)
}

// TestRecorderLost: a writer that cannot keep up makes the tap drop
// records and count them, never wait.
func TestRecorderLost(t *testing.T) {
	w := &blocking{release: make(chan struct{})}
	r, err := New(w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r.TapOpen(1, nil)
	// The writer takes records until its 256 KiB buffer is full (about
	// 1,600 of these) and blocks; the queue holds 8,192 more.
	f := request(1, "A/B", string(bytes.Repeat([]byte("x"), 100)))
	const n = 20000
	for i := 0; i < n; i++ {
		r.TapFrame(1, false, f)
	}
	lost := r.Stats().Lost
	close(w.release)
	s, err := r.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if lost == 0 || s.Lost < lost || s.Frames+s.Lost != n {
		t.Errorf("lost %d while blocked; at the end %+v, want frames + lost = %d", lost, s, n)
	}
	if _, end := entries(t, w.Bytes()); end.Lost != s.Lost || end.Frames != s.Frames {
		t.Errorf("end record %+v, Stop said %+v", end, s)
	}
}

// tapBench returns a Recorder of opts writing to io.Discard, its
// connection 1 open, and a 128-byte Request for it.
func tapBench(tb testing.TB, opts Options) (*Recorder, []byte) {
	tb.Helper()
	r, err := New(io.Discard, opts)
	if err != nil {
		tb.Fatal(err)
	}
	r.TapOpen(1, nil)
	return r, request(1, "Bench/EchoPacket", string(bytes.Repeat([]byte("x"), 128)))
}

// TestTapFrameAllocs: the tap costs no allocation per frame once its pool
// is warm.
func TestTapFrameAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	r, f := tapBench(t, Options{Answers: true})
	defer r.Stop()
	// Warm the pool with as many items as the queue holds, and let the
	// writer give them all back.
	for i := 0; i < 2*queueLen; i++ {
		r.TapFrame(1, false, f)
	}
	for i := 0; i < 10000 && (len(r.queue) > 0 || r.queued.Load() > 0); i++ {
		time.Sleep(time.Millisecond)
	}
	if n := testing.AllocsPerRun(1000, func() { r.TapFrame(1, false, f) }); n > 0.05 {
		t.Errorf("TapFrame allocates %v times per frame", n)
	}
}

// BenchmarkTapFrame measures what the tap costs the event loop per frame:
// a 128-byte Request copied and queued, the writer running beside it on
// io.Discard. lost/op says how many the writer could not keep up with.
func BenchmarkTapFrame(b *testing.B) {
	r, f := tapBench(b, Options{Answers: true, MaxBytes: 1 << 50})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.TapFrame(1, false, f)
	}
	b.StopTimer()
	s, _ := r.Stop()
	b.ReportMetric(float64(s.Lost)/float64(b.N), "lost/op")
}

// BenchmarkTapFrameKept measures what the tap costs the event loop per
// frame it keeps: 128-byte Requests, 4,096 at a time, each time the writer
// left to write them all, untimed, so that none is lost.
func BenchmarkTapFrameKept(b *testing.B) {
	r, f := tapBench(b, Options{Answers: true, MaxBytes: 1 << 50})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%4096 == 4095 {
			b.StopTimer()
			for held(r) > 0 {
				runtime.Gosched()
			}
			b.StartTimer()
		}
		r.TapFrame(1, false, f)
	}
	b.StopTimer()
	s, _ := r.Stop()
	if s.Lost != 0 {
		b.Fatalf("%+v after %d frames", s, b.N)
	}
}

// BenchmarkRecorderThroughput measures how many frames a second the
// recording keeps up with, tap and writer together: the tap waits while
// the queue is more than half full, so that nothing is lost.
func BenchmarkRecorderThroughput(b *testing.B) {
	r, err := New(io.Discard, Options{Answers: true, MaxBytes: 1 << 50})
	if err != nil {
		b.Fatal(err)
	}
	r.TapOpen(1, nil)
	req := request(1, "Bench/EchoPacket", string(bytes.Repeat([]byte("x"), 128)))
	resp := response(1, string(bytes.Repeat([]byte("x"), 128)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for i%64 == 0 && held(r) > queueLen/2 {
			runtime.Gosched()
		}
		if i%2 == 0 {
			r.TapFrame(1, false, req)
		} else {
			r.TapFrame(1, true, resp)
		}
	}
	s, _ := r.Stop()
	b.StopTimer()
	if s.Lost != 0 || s.Frames != int64(b.N) {
		b.Fatalf("%+v after %d frames", s, b.N)
	}
}

// held returns the most records a shard of r's queue holds.
func held(r *Recorder) int {
	n := 0
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		n = max(n, s.n)
		s.mu.Unlock()
	}
	return n
}

// TestRecorderFrameTooLarge: a frame past the frame limit a record holds
// (from a server configured for larger ones) is counted lost.
func TestRecorderFrameTooLarge(t *testing.T) {
	_, s := record(t, Options{}, func(r *Recorder) {
		r.TapOpen(1, nil)
		r.TapFrame(1, false, request(1, "A/B", string(make([]byte, proto.DefaultMaxFrameSize))))
	})
	if s.Lost != 1 || s.Frames != 0 {
		t.Errorf("stats %+v, want 1 lost, no frame", s)
	}
}

// TestStatsJSON: Stats in JSON (the admin listener's), and back.
func TestStatsJSON(t *testing.T) {
	s := Stats{Conns: 1, Calls: 2, Frames: 3, Bytes: 4, Lost: 5, Ended: EndMaxBytes}
	b, err := json.Marshal(s)
	if want := `{"conns":1,"calls":2,"frames":3,"bytes":4,"lost":5,"ended":"max bytes"}`; err != nil || string(b) != want {
		t.Errorf("%s, %v; want %s", b, err, want)
	}
	var back Stats
	if err := json.Unmarshal(b, &back); err != nil || back != s {
		t.Errorf("back: %+v, %v", back, err)
	}
}
