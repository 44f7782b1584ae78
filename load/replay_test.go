package load

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/servertest"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// The mix of the replay tests: three routes in the proportions 60/30/10
// over mixConns connections, mixSteady calls spread evenly over a second
// and a burst of mixBurst calls at once half-way through: 1,800 calls/s,
// which a loaded machine keeps up with at 1× and at 4×.
const (
	mixConns  = 4
	mixSteady = 1500
	mixBurst  = 300
	mixLength = time.Second
	mixBDead  = 2 * time.Second // Mix/B's calls carry this deadline
)

var mixRoutes = []string{"Mix/A", "Mix/B", "Mix/C"}

// mixAnswer is what mixServer's route answers a call with seq; served.at
// differs from call to call.
func mixAnswer(route string, seq int, at int64) string {
	return fmt.Sprintf(`{"route":%q,"seq":%d,"served":{"at":%d}}`, route, seq, at)
}

// mixRecording returns the generated mix: call i in time order is on
// connection i%mixConns, route mixRoutes by i%10 (6, 3, 1 of every ten),
// with metadata naming its connection and its place on it ("conn", "seq"),
// and the answer mixServer gives (Mix/C fails NotFound).
func mixRecording() *Recording {
	var ats []time.Duration
	for i := range mixSteady {
		ats = append(ats, time.Duration(i)*mixLength/mixSteady)
	}
	for range mixBurst {
		ats = append(ats, mixLength/2)
	}
	slices.Sort(ats)
	rec := &Recording{Name: "mix", Length: mixLength}
	seqs := make([]int, mixConns)
	for i, at := range ats {
		conn := i % mixConns
		seq := seqs[conn]
		seqs[conn]++
		route := mixRoutes[0]
		if k := i % 10; k >= 9 {
			route = mixRoutes[2]
		} else if k >= 6 {
			route = mixRoutes[1]
		}
		var md proto.Metadata
		md = proto.AppendMetadata(md, "conn", []byte(strconv.Itoa(conn)))
		md = proto.AppendMetadata(md, "seq", []byte(strconv.Itoa(seq)))
		call := ReplayCall{At: at, Conn: uint64(100 + conn), Kind: proto.KindRequest, Route: route,
			Codec: proto.CodecJSON, Metadata: md, Payload: []byte(fmt.Sprintf(`{"seq":%d}`, seq)),
			Answered: true, Answer: []byte(mixAnswer(route, seq, 0))}
		switch route {
		case "Mix/B":
			call.Deadline = mixBDead
		case "Mix/C":
			call.Codec, call.Payload = proto.CodecRaw, []byte("c")
			call.Code, call.Answer = proto.CodeNotFound, []byte("no such thing")
		}
		rec.Calls = append(rec.Calls, call)
	}
	return rec
}

// mixServer serves the mix's routes and checks, per connection, that the
// calls come in their recorded order with their metadata, and Mix/B's
// with its deadline. With changeB, Mix/B answers another route's name.
type mixServer struct {
	srv  *reactor.Server
	addr string

	mu       sync.Mutex
	byRoute  map[string]int
	byRemote map[string]string // its "conn" metadata
	next     map[string]int    // its next "seq"
	wrong    []string
}

func startMix(t *testing.T, changeB bool) *mixServer {
	t.Helper()
	m := &mixServer{byRoute: map[string]int{}, byRemote: map[string]string{}, next: map[string]int{}}
	reg := handler.NewRegistry()
	for _, route := range mixRoutes {
		reg.HandleFunc(route, func(ctx context.Context, req, reply []byte) ([]byte, error) {
			seq := m.saw(ctx, route)
			switch {
			case route == "Mix/C":
				return reply, handler.Errorf(proto.CodeNotFound, "no such thing")
			case route == "Mix/B" && changeB:
				return append(reply, mixAnswer("Mix/B2", seq, time.Now().UnixNano())...), nil
			}
			return append(reply, mixAnswer(route, seq, time.Now().UnixNano())...), nil
		})
	}
	m.srv = servertest.Start(t, reg, reactor.Options{})
	m.addr = m.srv.Addr().String()
	return m
}

// saw checks and counts a call to route, and returns its "seq".
func (m *mixServer) saw(ctx context.Context, route string) int {
	call := handler.CallFrom(ctx)
	conn, _ := call.Metadata.Get("conn")
	seqb, _ := call.Metadata.Get("seq")
	seq, _ := strconv.Atoi(string(seqb))
	remote := call.Remote.String()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.byRoute[route]++
	if c, ok := m.byRemote[remote]; ok && c != string(conn) {
		m.wrong = append(m.wrong, fmt.Sprintf("connection %s carries the calls of recorded connections %s and %s", remote, c, conn))
	}
	m.byRemote[remote] = string(conn)
	if seq != m.next[remote] {
		m.wrong = append(m.wrong, fmt.Sprintf("connection %s: call %d came after call %d", conn, seq, m.next[remote]-1))
	}
	m.next[remote] = seq + 1
	dl, ok := ctx.Deadline()
	if route == "Mix/B" && (!ok || time.Until(dl) > mixBDead) {
		m.wrong = append(m.wrong, fmt.Sprintf("a Mix/B call with the deadline %v, want %v at most", time.Until(dl), mixBDead))
	}
	return seq
}

// check fails t for what the server saw wrong, and for calls not in the
// counts want.
func (m *mixServer) check(t *testing.T, want map[string]int) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.wrong[:min(len(m.wrong), 5)] {
		t.Error(w)
	}
	if fmt.Sprint(m.byRoute) != fmt.Sprint(want) {
		t.Errorf("the server served %v, want %v", m.byRoute, want)
	}
	if len(m.byRemote) != mixConns {
		t.Errorf("the calls came on %d connections, want the %d recorded", len(m.byRemote), mixConns)
	}
}

// replayMix replays the generated mix (mixRecording) at addr.
func replayMix(t *testing.T, addr string, speed float64, compare bool, ignore ...string) *Report {
	t.Helper()
	return replayAt(t, addr, mixRecording(), speed, compare, ignore...)
}

// replayAt replays rec at addr, every call's deadline within runTimeout.
func replayAt(t *testing.T, addr string, rec *Recording, speed float64, compare bool, ignore ...string) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	rep, err := Replay(ctx, ReplayConfig{Addr: addr, Recording: rec, Speed: speed, Timeout: runTimeout,
		Compare: compare, CompareIgnore: ignore})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestReplayMix is the Done-means on a generated recording: at 1×
// every call is made, on as many connections as recorded, each
// connection's in order with its metadata and deadline, the routes in
// exactly their proportions, at the recorded rate ±5 %; at 4× the rate is
// four times that, or the report says it fell behind.
func TestReplayMix(t *testing.T) {
	recorded := float64(mixSteady+mixBurst) / mixLength.Seconds()
	m := startMix(t, false)
	rep := replayMix(t, m.addr, 1, false)
	checkMixReplay(t, m, rep, 1, recorded)

	m4 := startMix(t, false)
	rep = replayMix(t, m4.addr, 4, false)
	checkMixReplay(t, m4, rep, 4, recorded)
	var b bytes.Buffer
	if err := rep.WriteText(&b, 1); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"replay: mix, 1800 calls over 4 connections", "speed 4", "routes: 1080 Mix/A (60.0%), 540 Mix/B (30.0%), 180 Mix/C (10.0%)", "errors: 180 not found"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("the report lacks %q:\n%s", s, &b)
		}
	}
}

// checkMixReplay checks the replay rep of the mix, recorded at recorded
// calls/s, into m at speed: every call made, each connection's in order
// with its metadata and deadline (m.check), the routes in exactly their
// proportions; at 1× the recorded rate ±5 %; faster, that rate × speed
// ±5 %, or a report that it fell behind.
func checkMixReplay(t *testing.T, m *mixServer, rep *Report, speed, recorded float64) {
	t.Helper()
	total := mixSteady + mixBurst
	want := map[string]int{"Mix/A": total * 6 / 10, "Mix/B": total * 3 / 10, "Mix/C": total / 10}
	m.check(t, want)
	rr := rep.Replay
	if rep.Calls != int64(total) || rep.Errors != int64(want["Mix/C"]) || rep.ErrorsBy["not found"] != int64(want["Mix/C"]) {
		t.Errorf("calls %d, errors %v; want %d calls, the %d of Mix/C not found", rep.Calls, rep.ErrorsBy, total, want["Mix/C"])
	}
	for route, n := range want {
		if rr.Routes[route] != int64(n) {
			t.Errorf("made %d calls to %s, want %d: %v", rr.Routes[route], route, n, rr.Routes)
		}
	}
	if rr.Sent["Request"] != int64(total) || rep.Settings.Connections != mixConns {
		t.Errorf("sent %v over %d connections, want %d requests over %d", rr.Sent, rep.Settings.Connections, total, mixConns)
	}
	asked := recorded * speed
	if math.Abs(rr.RecordedRate-recorded) > 0.1 || math.Abs(rr.AskedRate-asked) > 0.1 || rep.Settings.Rate != rr.AskedRate || rr.Speed != speed {
		t.Errorf("recorded rate %v, asked %v (settings %v) at speed %v; want %v and %v", rr.RecordedRate, rr.AskedRate, rep.Settings.Rate, rr.Speed, recorded, asked)
	}
	if rep.CallsPerSec != rr.ReachedRate || rep.P50US <= 0 || rep.MaxUS < rep.P50US {
		t.Errorf("calls/s %v, reached %v; latencies p50 %v µs, max %v µs", rep.CallsPerSec, rr.ReachedRate, rep.P50US, rep.MaxUS)
	}
	// Whether the replay keeps up is the machine's (a loaded CI machine may
	// not, even at 1×; bench/scripts measure it): the report must say
	// which, and be right.
	switch {
	case rr.FellBehind:
		if rr.ReachedRate >= rateReachedShare*asked || !strings.Contains(rep.RateShortfall, "fell behind") || *rep.RateReached {
			t.Errorf("fell behind at %v× (%v calls/s of %v) without saying so, or said so wrongly: %q", speed, rr.ReachedRate, asked, rep.RateShortfall)
		}
		t.Logf("at %v×: %s", speed, rep.RateShortfall)
	case math.Abs(rr.ReachedRate-asked) > 0.05*asked:
		t.Errorf("at %v×: reached %v calls/s, want %v ±5%%, or to say it fell behind", speed, rr.ReachedRate, asked)
	case rep.RateShortfall != "" || rep.RateReached == nil || !*rep.RateReached:
		t.Errorf("at %v×: kept up, yet shortfall %q, reached %v", speed, rep.RateShortfall, rep.RateReached)
	}
}

// TestReplayCompare: against a server changed to answer Mix/B differently,
// -compare reports exactly Mix/B's calls, with examples; Mix/C's errors,
// recorded as they come again, match; a field ignored at any depth makes
// the difference go.
func TestReplayCompare(t *testing.T) {
	m := startMix(t, true)
	rep := replayMix(t, m.addr, 4, true, "served.at")
	c := rep.Replay.Compare
	total := int64(mixSteady + mixBurst)
	if c == nil || c.Compared != total || c.Mismatches != total*3/10 || len(c.ByRoute) != 1 || c.ByRoute["Mix/B"] == nil {
		t.Fatalf("compare: %+v; want %d answers compared, the %d of Mix/B alone differing", c, total, total*3/10)
	}
	ex := c.ByRoute["Mix/B"].Examples
	if len(ex) != mismatchExamples || ex[0].What != "$.route" || ex[0].Want != `"Mix/B"` || ex[0].Got != `"Mix/B2"` {
		t.Errorf("examples %+v; want %d, of $.route, \"Mix/B\" against \"Mix/B2\"", ex, mismatchExamples)
	}
	var b bytes.Buffer
	if err := rep.WriteText(&b, 1); err != nil {
		t.Fatal(err)
	}
	if want := "compare: 540 of 1800 answers differ from the recorded ones (ignoring served.at): 540 Mix/B"; !strings.Contains(b.String(), want) {
		t.Errorf("the report lacks %q:\n%s", want, &b)
	}

	rep = replayMix(t, m.addr, 4, true, "at", "route")
	if c := rep.Replay.Compare; c.Compared != total || c.Mismatches != 0 {
		t.Errorf("ignoring at and route: %d of %d differ, want none: %+v", c.Mismatches, c.Compared, c.ByRoute)
	}
	rep = replayMix(t, m.addr, 4, true)
	if c := rep.Replay.Compare; c.Mismatches != total*6/10+total*3/10 {
		t.Errorf("ignoring nothing: %d differ, want every answer but Mix/C's errors (%d)", c.Mismatches, total*9/10)
	}
}

// TestCompareDiff: the comparison of two answers, JSON and bytes, with
// fields ignored by name and by path.
func TestCompareDiff(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ignore     []string
		want, got  string
		what, w, g string // "" what: they match
	}{
		{"same value, other order and spacing", nil, `{"a":1,"b":[1,2]}`, `{ "b":[1,2], "a":1.0 }`, "", "", ""},
		{"nested value", nil, `{"a":{"b":[1,{"c":"x"}]}}`, `{"a":{"b":[1,{"c":"y"}]}}`, "$.a.b[1].c", `"x"`, `"y"`},
		{"field missing", nil, `{"a":1,"b":2}`, `{"a":1}`, "$.b", "2", "(absent)"},
		{"field added", nil, `{"a":1}`, `{"a":1,"z":null}`, "$.z", "(absent)", "null"},
		{"array length", nil, `[1,2]`, `[1,2,3]`, "$", "[1,2]", "[1,2,3]"},
		{"name at any depth", []string{"c"}, `{"c":1,"a":{"b":[{"c":1}]}}`, `{"c":2,"a":{"b":[{"c":2}]}}`, "", "", ""},
		{"path from the top", []string{"a.b.c"}, `{"c":1,"a":{"b":[{"c":1}]}}`, `{"c":1,"a":{"b":[{"c":2}]}}`, "", "", ""},
		{"path elsewhere kept", []string{"a.c"}, `{"c":1,"a":{"b":{"c":1}}}`, `{"c":1,"a":{"b":{"c":2}}}`, "$.a.b.c", "1", "2"},
		{"bytes", nil, "ab\x00", "ab\x01", "payload", `"ab\x00"`, `"ab\x01"`},
		{"bytes the same", []string{"a"}, "\xff", "\xff", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newComparer(tc.ignore)
			m, differ := c.diff(&ReplayCall{Answer: []byte(tc.want)}, []byte(tc.got), nil)
			if differ != (tc.what != "") || m.What != tc.what || m.Want != tc.w || m.Got != tc.g {
				t.Errorf("%v %+v; want %q: %s against %s", differ, m, tc.what, tc.w, tc.g)
			}
		})
	}
	c := newComparer(nil)
	if m, differ := c.diff(&ReplayCall{Answer: []byte("x"), AnswerCodeOnly: true}, []byte("y"), nil); differ {
		t.Errorf("a redacted answer's payload compared: %+v", m)
	}
	m, differ := c.diff(&ReplayCall{Code: proto.CodeNotFound, Answer: []byte("gone")}, nil, handler.Errorf(proto.CodeNotFound, "elsewhere"))
	if differ {
		t.Errorf("the same code with another message: %+v, want a match", m)
	}
	m, differ = c.diff(&ReplayCall{Answer: []byte("1")}, nil, handler.Errorf(proto.CodeInternal, "boom"))
	if !differ || m.What != "code" || m.Want != "ok" || !strings.HasPrefix(m.Got, "internal: ") {
		t.Errorf("an error for a recorded success: %v %+v", differ, m)
	}
	if s := shorten(bytes.Repeat([]byte("é"), 100)); !strings.HasSuffix(s, "…") || len(s) > shownBytes+len("…") {
		t.Errorf("shortened to %q", s)
	}
}

// TestReplayKinds: a OneWay is sent as a notify and a Publish as a
// publish, each with its codec; frames not replayed are reported as
// skipped; Loops plays the recording again, and Duration stops a replay
// that loops until it.
func TestReplayKinds(t *testing.T) {
	reg := handler.NewRegistry()
	notes := make(chan string, 16)
	reg.HandleFunc("K/Note", func(ctx context.Context, req, reply []byte) ([]byte, error) {
		notes <- fmt.Sprintf("%v %s", handler.CallFrom(ctx).Codec, req)
		return reply, nil
	})
	var mu sync.Mutex
	var calls []string
	reg.HandleFunc("K/Call", func(_ context.Context, req, reply []byte) ([]byte, error) {
		mu.Lock()
		calls = append(calls, string(req))
		mu.Unlock()
		return reply, nil
	})
	var srv atomic.Pointer[reactor.Server] // set once started, read by Sys/Stats
	builtin.HandleStats(reg, func() int { return srv.Load().Conns() })
	srv.Store(servertest.Start(t, reg, reactor.Options{}))
	addr := srv.Load().Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	sub, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	msgs := make(chan client.Message, 16)
	if _, err := sub.Subscribe(ctx, "k.>", msgs); err != nil {
		t.Fatal(err)
	}

	rec := &Recording{Name: "kinds", Length: 100 * time.Millisecond, CutShort: true, Skipped: map[string]int64{"Subscribe": 1, "StreamOpen": 2},
		Calls: []ReplayCall{
			{At: 0, Conn: 1, Kind: proto.KindRequest, Route: "K/Call", Payload: []byte("1")},
			{At: 10 * time.Millisecond, Conn: 1, Kind: proto.KindOneWay, Route: "K/Note", Codec: proto.CodecJSON, Payload: []byte(`"n"`)},
			{At: 20 * time.Millisecond, Conn: 2, Kind: proto.KindPublish, Route: "k.x", Codec: proto.CodecJSON, Payload: []byte(`{"p":1}`)},
			{At: 50 * time.Millisecond, Conn: 1, Kind: proto.KindRequest, Route: "K/Call", Payload: []byte("2")},
		}}
	rep, err := Replay(ctx, ReplayConfig{Addr: addr, Recording: rec, Loops: 2})
	if err != nil {
		t.Fatal(err)
	}
	rr := rep.Replay
	if fmt.Sprint(rr.Sent) != "map[OneWay:2 Publish:2 Request:4]" || rep.Calls != 8 || rep.Errors != 0 {
		t.Errorf("sent %v, %d calls, %d errors; want 4 requests, 2 one-way, 2 publishes, 8 calls and no error", rr.Sent, rep.Calls, rep.Errors)
	}
	mu.Lock()
	got := strings.Join(calls, " ")
	mu.Unlock()
	if got != "1 2 1 2" {
		t.Errorf("K/Call ran with %q, want the recording's order twice: 1 2 1 2", got)
	}
	for range 2 {
		select {
		case n := <-notes:
			if n != `json "n"` {
				t.Errorf("the OneWay ran with %q, want json \"n\"", n)
			}
		case <-ctx.Done():
			t.Fatal("a OneWay never ran")
		}
		select {
		case m := <-msgs:
			if m.Topic != "k.x" || m.Codec != proto.CodecJSON || string(m.Payload) != `{"p":1}` {
				t.Errorf("published %s %v %q", m.Topic, m.Codec, m.Payload)
			}
		case <-ctx.Done():
			t.Fatal("a Publish never came")
		}
	}
	var b bytes.Buffer
	if err := rep.WriteText(&b, 1); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"played 2 times", "ends without its end record", "made: 4 Request, 2 OneWay, 2 Publish", "skipped, not replayed: 2 StreamOpen, 1 Subscribe"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("the report lacks %q:\n%s", s, &b)
		}
	}

	// Until Duration: the plays at 0, 100 and 200 ms; the call due at
	// 300 ms is not made.
	mu.Lock()
	calls = nil
	mu.Unlock()
	// Through Bench, as rpcd bench runs it, with the server's CPU read.
	var starting bool
	rep, err = Bench(ctx, Config{Addr: addr, Duration: 300 * time.Millisecond, Replay: &ReplayConfig{Recording: rec},
		ServerCPU: ServerCPUFromStats(sub, runTimeout), Progress: func(p Progress) { starting = starting || p.Starting }})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replay.Sent["Request"] != 6 || rep.Replay.Sent["OneWay"] != 3 {
		t.Errorf("for 300 ms of a 100 ms recording: sent %v, want 6 requests and 3 one-way calls", rep.Replay.Sent)
	}
	if !starting || rep.CPUPerCallUS <= 0 || rep.ServerCPUPerCallUS <= 0 || rep.Settings.Scenario != ReplayName || rep.Settings.Duration != "300ms" {
		t.Errorf("progress started %v, CPU per call %v µs, server's %v µs, settings %+v", starting, rep.CPUPerCallUS, rep.ServerCPUPerCallUS, rep.Settings)
	}
	for range 3 {
		<-notes
		<-msgs
	}
}

// TestReplayBadRecording: a recording Replay cannot make is refused before
// anything is dialled.
func TestReplayBadRecording(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		rec  *Recording
		want string
	}{
		{"none", nil, "no call"},
		{"empty", &Recording{}, "no call"},
		{"a stream", &Recording{Calls: []ReplayCall{{Kind: proto.KindStreamOpen, Route: "a/b"}}}, "not a call a replay makes"},
		{"bad metadata", &Recording{Calls: []ReplayCall{{Kind: proto.KindRequest, Route: "a/b", Metadata: proto.Metadata{5, 'a'}}}}, "metadata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Replay(ctx, ReplayConfig{Addr: "127.0.0.1:1", Recording: tc.rec})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestReplayFellBehind: a replay whose calls cannot go out on time (each
// one-way call held 5 ms on the pacer's goroutine by an interceptor, 1,000
// asked a second) says that it fell behind, by how much and how late.
func TestReplayFellBehind(t *testing.T) {
	reg := handler.NewRegistry()
	reg.HandleFunc("K/Note", func(_ context.Context, _, reply []byte) ([]byte, error) { return reply, nil })
	addr := servertest.Start(t, reg, reactor.Options{}).Addr().String()
	rec := &Recording{Name: "slow", Length: 100 * time.Millisecond}
	for i := range 100 {
		rec.Calls = append(rec.Calls, ReplayCall{At: time.Duration(i) * time.Millisecond, Conn: 1, Kind: proto.KindOneWay, Route: "K/Note"})
	}
	slow := func(ctx context.Context, _ *client.CallInfo, req, reply []byte, next client.Invoker) ([]byte, error) {
		time.Sleep(5 * time.Millisecond)
		return next(ctx, req, reply)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	rep, err := Replay(ctx, ReplayConfig{Addr: addr, Recording: rec, Client: client.Options{Interceptors: []client.Interceptor{slow}}})
	if err != nil {
		t.Fatal(err)
	}
	rr := rep.Replay
	if !rr.FellBehind || rep.RateReached == nil || *rep.RateReached || !strings.Contains(rep.RateShortfall, "the replay fell behind") {
		t.Fatalf("reached %v of %v calls/s: fell behind %v, shortfall %q", rr.ReachedRate, rr.AskedRate, rr.FellBehind, rep.RateShortfall)
	}
	if rr.ReachedRate > 250 || rr.LateMaxUS < 300e3 || rep.Calls != 100 {
		t.Errorf("%d calls at %v calls/s, %v µs late at most; want 100 at 200 calls/s at most, the last ones 400 ms late", rep.Calls, rr.ReachedRate, rr.LateMaxUS)
	}
	var b bytes.Buffer
	if err := rep.WriteText(&b, 1); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "\nfell behind: ") {
		t.Errorf("the report lacks its fell behind line:\n%s", &b)
	}
}
