package transport

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// logBuffer collects a logger's lines; safe for concurrent writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func echo(_ context.Context, req, reply []byte) ([]byte, error) { return append(reply, req...), nil }

type nopStream struct{}

func (*nopStream) Context() context.Context    { return context.Background() }
func (*nopStream) Read([]byte) (int, error)    { return 0, nil }
func (*nopStream) Write(p []byte) (int, error) { return len(p), nil }
func (*nopStream) CloseSend() error            { return nil }
func (*nopStream) Close() error                { return nil }

// runnerRoutes registers the outcomes every transport must give alike.
func runnerRoutes(reg *handler.Registry) {
	reg.HandleFunc("Run/OK", echo)
	reg.HandleFunc("Run/Panic", func(context.Context, []byte, []byte) ([]byte, error) { panic("boom") })
	reg.HandleFunc("Run/Big", func(_ context.Context, _, reply []byte) ([]byte, error) {
		return append(reply, make([]byte, 1000)...), nil
	})
	reg.HandleFunc("Run/Fail", func(context.Context, []byte, []byte) ([]byte, error) {
		return nil, &handler.Error{Code: proto.CodePermissionDenied, Message: "not you", Unprocessed: true}
	})
	reg.HandleFunc("Run/Plain", func(context.Context, []byte, []byte) ([]byte, error) { return nil, errors.New("plain") })
	// A callee's refusal passed on: the handler ran.
	reg.HandleFunc("Run/Passed", func(context.Context, []byte, []byte) ([]byte, error) {
		return nil, Received(&handler.Error{Code: proto.CodeUnavailable, Message: "backend draining", Unprocessed: true})
	})
}

// TestRunnerOutcomes: Run answers each outcome with its frame, counts
// every Error it sends and logs a panic with its stack; Outcome gives the
// same errors for the gateway; a one-way call's failure is only logged.
func TestRunnerOutcomes(t *testing.T) {
	reg := handler.NewRegistry()
	runnerRoutes(reg)
	var logs logBuffer
	var failed []proto.Code
	r := &Runner{MaxFrame: 512, Logger: logs.logger(), Failed: func(err error) { failed = append(failed, handler.CodeOf(err)) }}
	for _, tc := range []struct {
		route string
		code  proto.Code
		msg   string
		flags proto.Flags
	}{
		{"Run/OK", proto.CodeOK, "", 0},
		{"Run/Panic", proto.CodeInternal, "handler for Run/Panic panicked: boom", 0},
		{"Run/Big", proto.CodeResourceExhausted, "reply of 1024 bytes exceeds the frame limit of 512", 0},
		{"Run/Fail", proto.CodePermissionDenied, "not you", proto.FlagUnprocessed},
		{"Run/Plain", proto.CodeUnknown, "plain", 0},
		{"Run/Passed", proto.CodeUnavailable, "backend draining", 0},
	} {
		for _, inline := range []bool{false, true} {
			call := &handler.Call{Route: tc.route, ID: 7, Remote: &net.TCPAddr{Port: 1}}
			j := Job{Route: reg.Lookup([]byte(tc.route)), Call: call, Req: []byte("hi")}
			if inline {
				j.Watch = new(Watch)
			}
			out, own := r.Run(&j, []byte("before"))
			if own != nil || !bytes.HasPrefix(out, []byte("before")) {
				t.Fatalf("%s: own %q, out %q", tc.route, own, out)
			}
			f, n, err := proto.Decode(out[len("before"):], nil)
			if err != nil || n != len(out)-len("before") || f.ID != 7 {
				t.Fatalf("%s: frame %+v, %d bytes of %d, %v", tc.route, f.Header, n, len(out), err)
			}
			if tc.code == proto.CodeOK {
				if f.Kind != proto.KindResponse || string(f.Payload) != "hi" {
					t.Fatalf("%s: %v %q", tc.route, f.Kind, f.Payload)
				}
				continue
			}
			code, msg := f.ErrorBody()
			if f.Kind != proto.KindError || code != tc.code || string(msg) != tc.msg || f.Flags != tc.flags {
				t.Errorf("%s (inline %v): %v %v %q flags %v; want %v %q flags %v", tc.route, inline, f.Kind, code, msg, f.Flags, tc.code, tc.msg, tc.flags)
			}
			if _, err := r.Outcome(reg.Lookup([]byte(tc.route)), &handler.Call{Route: tc.route, Remote: call.Remote}, []byte("hi"), nil); handler.CodeOf(err) != tc.code || handler.MessageOf(err) != tc.msg || AnswersUnprocessed(err) != (tc.flags != 0) {
				t.Errorf("%s: Outcome %v; want %v %q", tc.route, err, tc.code, tc.msg)
			}
		}
	}
	// Five failures, each counted by Run twice and by Outcome twice.
	if len(failed) != 20 {
		t.Errorf("Failed told %d times: %v", len(failed), failed)
	}
	if n := strings.Count(logs.String(), `msg="rpcd: handler panicked" route=Run/Panic remote=:1 panic=boom stack=`); n != 4 {
		t.Errorf("%d panic logs with the route, remote and a stack; want 4:\n%s", n, logs.String())
	}

	// One way: no frame, a failure logged at Debug, nothing counted.
	failed = nil
	for _, route := range []string{"Run/OK", "Run/Fail", "Run/Big"} {
		j := Job{Route: reg.Lookup([]byte(route)), Call: &handler.Call{Route: route}, OneWay: true}
		if out, own := r.Run(&j, nil); len(out) != 0 || own != nil {
			t.Errorf("one-way %s answered %q %q", route, out, own)
		}
	}
	if len(failed) != 0 || !strings.Contains(logs.String(), `msg="rpcd: one-way call failed" route=Run/Fail`) {
		t.Errorf("one-way failures: counted %v; logs:\n%s", failed, logs.String())
	}

	// Job.Err answers without running the handler.
	j := Job{Route: reg.Lookup([]byte("Run/Panic")), Call: &handler.Call{ID: 9}, Err: &handler.Error{Code: proto.CodeCanceled, Message: "gone", Unprocessed: true}}
	out, _ := r.Run(&j, nil)
	if f, _, _ := proto.Decode(out, nil); f.Kind != proto.KindError || f.Flags != proto.FlagUnprocessed {
		t.Errorf("Job.Err: %+v", f.Header)
	}
}

// TestRunnerCompress: Compress sees a reply before the frame limit does,
// and only for a Job with a Zip.
func TestRunnerCompress(t *testing.T) {
	reg := handler.NewRegistry()
	runnerRoutes(reg)
	r := &Runner{MaxFrame: 512, Compress: func(out []byte, start int, own []byte, zip proto.Compression) ([]byte, []byte) {
		return out[:start+proto.HeaderSize+10], own // "compressed" to 10 bytes
	}}
	for _, zip := range []proto.Compression{proto.CompressionNone, proto.CompressionZstd} {
		out, _ := r.Run(&Job{Route: reg.Lookup([]byte("Run/Big")), Call: &handler.Call{ID: 1}, Zip: zip}, nil)
		f, _, _ := proto.Decode(out, nil)
		if want := map[proto.Compression]proto.Kind{proto.CompressionNone: proto.KindError, proto.CompressionZstd: proto.KindResponse}[zip]; f.Kind != want {
			t.Errorf("zip %v: %v, want %v", zip, f.Kind, want)
		}
	}
}

// TestRunnerStream: a stream handler's panic is logged and counted, its
// error returned.
func TestRunnerStream(t *testing.T) {
	reg := handler.NewRegistry()
	reg.HandleStream("S/Panic", func(context.Context, handler.Stream) error { panic("stream boom") })
	var logs logBuffer
	var failed int
	r := &Runner{Logger: logs.logger(), Failed: func(error) { failed++ }}
	call := &handler.Call{Route: "S/Panic"}
	call.Start(WithStream(context.Background(), &nopStream{}), time.Time{})
	err := r.Stream(reg.LookupStream([]byte("S/Panic")), call)
	if handler.CodeOf(err) != proto.CodeInternal || handler.MessageOf(err) != "handler for S/Panic panicked: stream boom" || failed != 1 {
		t.Fatalf("%v, counted %d", err, failed)
	}
	if !strings.Contains(logs.String(), `msg="rpcd: handler panicked" route=S/Panic`) {
		t.Fatalf("logs:\n%s", logs.String())
	}
}

// TestRunInlineAllocs: an inline run through the runner, watched and
// sometimes timed, allocates nothing.
func TestRunInlineAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts do not hold under the race detector")
	}
	reg := handler.NewRegistry()
	reg.HandleFunc("Run/OK", echo)
	r := &Runner{}
	j := Job{Route: reg.Lookup([]byte("Run/OK")), Call: &handler.Call{Inline: true}, Req: []byte("hello"), Watch: new(Watch)}
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(1000, func() { buf, _ = r.Run(&j, buf[:0]) }); n != 0 {
		t.Fatalf("Run allocates %v times per inline call", n)
	}
}

// TestInlineBudget: a route whose timed inline runs keep passing the
// budget moves to the blocking pool once, logged, after moveAfter of them;
// a route pinned with Inline, a fast route and a Runner whose Budget is
// negative never move one.
func TestInlineBudget(t *testing.T) {
	defer func(n uint32) { sampleEvery = n }(sampleEvery)
	sampleEvery = 1 // time every run
	slow := func(context.Context, []byte, []byte) ([]byte, error) {
		time.Sleep(3 * time.Millisecond)
		return nil, nil
	}
	reg := handler.NewRegistry()
	reg.HandleFunc("Slow/Moves", slow)
	reg.HandleFunc("Slow/Pinned", slow, handler.Inline())
	reg.HandleFunc("Fast/Stays", echo)
	reg.HandleFunc("Slow/NoBudget", slow)

	var logs logBuffer
	r := &Runner{Logger: logs.logger()}
	run := func(r *Runner, route string) {
		j := Job{Route: reg.Lookup([]byte(route)), Call: &handler.Call{Route: route, Inline: true}, Watch: new(Watch)}
		r.Run(&j, nil)
	}
	for i := 1; i <= 2*moveAfter; i++ {
		run(r, "Slow/Moves")
		if moved := reg.Lookup([]byte("Slow/Moves")).IsBlocking(); moved != (i >= moveAfter) {
			t.Fatalf("after %d slow runs: moved %v", i, moved)
		}
		run(r, "Slow/Pinned")
		run(r, "Fast/Stays")
		run(&Runner{Logger: r.Logger, Budget: -1}, "Slow/NoBudget")
	}
	for _, info := range reg.Routes() {
		want := handler.RouteInfo{Name: info.Name}
		switch info.Name {
		case "Slow/Moves":
			want.Blocking, want.Moved = true, true
		case "Slow/Pinned":
			want.Inline = true
		}
		if info != want {
			t.Errorf("%+v, want %+v", info, want)
		}
	}
	if n := strings.Count(logs.String(), "rpcd: route moved from the event loop to the blocking pool"); n != 1 ||
		!strings.Contains(logs.String(), `route=Slow/Moves budget=1ms over="8 of its last 16 timed runs"`) {
		t.Errorf("%d logs of the move:\n%s", n, logs.String())
	}

	// Fast runs between slow ones keep a route where it is.
	reg.HandleFunc("Mixed/Stays", func(_ context.Context, req, _ []byte) ([]byte, error) {
		if len(req) > 0 {
			time.Sleep(3 * time.Millisecond)
		}
		return nil, nil
	})
	for i := range 4 * window {
		j := Job{Route: reg.Lookup([]byte("Mixed/Stays")), Call: &handler.Call{Inline: true}, Watch: new(Watch)}
		if i%3 == 0 {
			j.Req = []byte("slow") // a third of the runs over budget
		}
		r.Run(&j, nil)
	}
	if reg.Lookup([]byte("Mixed/Stays")).IsBlocking() {
		t.Error("a route with a third of its runs over budget moved")
	}
}

// TestInlineSampling: with the default sampling, one inline call in
// sampleEvery per Watch is timed.
func TestInlineSampling(t *testing.T) {
	reg := handler.NewRegistry()
	reg.HandleFunc("Slow/Sampled", func(context.Context, []byte, []byte) ([]byte, error) {
		time.Sleep(1100 * time.Microsecond)
		return nil, nil
	})
	rt := reg.Lookup([]byte("Slow/Sampled"))
	r := &Runner{Logger: slog.New(slog.DiscardHandler)}
	w := new(Watch)
	for range int(sampleEvery) - 1 {
		r.Run(&Job{Route: rt, Call: &handler.Call{}, Watch: w}, nil)
	}
	if routeState(rt).Runs.Load() != 0 {
		t.Fatalf("a run was timed before the %dth", sampleEvery)
	}
	r.Run(&Job{Route: rt, Call: &handler.Call{}, Watch: w}, nil)
	if routeState(rt).Runs.Load() != 1 {
		t.Fatalf("the %dth run: runs %b", sampleEvery, routeState(rt).Runs.Load())
	}
}

// TestCheck: the watchdog reports a handler that holds its loop, one that
// never returns until told, once per run after threshold, with the stack
// of the handler; the route's overruns count each run; the first alone is
// logged; an idle Watch or a short run is never reported.
func TestCheck(t *testing.T) {
	reg := handler.NewRegistry()
	release := make(chan struct{})
	running := make(chan struct{})
	reg.HandleFunc("Stuck/Route", func(context.Context, []byte, []byte) ([]byte, error) {
		running <- struct{}{}
		<-release
		return nil, nil
	}, handler.Inline())
	rt := reg.Lookup([]byte("Stuck/Route"))
	var logs logBuffer
	r := &Runner{Logger: logs.logger()}
	w := new(Watch)
	remote := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4242}
	const threshold = 100 * time.Millisecond
	t0 := time.Now()

	r.Check(w, t0, threshold, remote) // idle
	for run := 1; run <= 2; run++ {
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.Run(&Job{Route: rt, Call: &handler.Call{Route: "Stuck/Route", Inline: true}, Watch: w}, nil)
		}()
		<-running
		base := t0.Add(time.Duration(run) * time.Hour)
		r.Check(w, base, threshold, remote)                                // first seen
		r.Check(w, base.Add(threshold-time.Nanosecond), threshold, remote) // not yet
		if got := routeState(rt).Overruns.Load(); got != uint64(run-1) {
			t.Fatalf("run %d: %d overruns before the threshold", run, got)
		}
		r.Check(w, base.Add(threshold), threshold, remote)
		r.Check(w, base.Add(10*threshold), threshold, remote) // the same run: told once
		if got := routeState(rt).Overruns.Load(); got != uint64(run) {
			t.Fatalf("run %d: %d overruns", run, got)
		}
		release <- struct{}{}
		<-done
		r.Check(w, base.Add(11*threshold), threshold, remote) // returned: idle
	}
	log := logs.String()
	if n := strings.Count(log, "holds its event loop past the watchdog's threshold"); n != 1 {
		t.Fatalf("%d overrun logs; want 1:\n%s", n, log)
	}
	for _, want := range []string{"route=Stuck/Route", "running=100ms", "threshold=100ms", "remote=127.0.0.1:4242",
		"transport.TestCheck.func1", inlineFrame} {
		if !strings.Contains(log, want) {
			t.Errorf("the overrun log lacks %q:\n%s", want, log)
		}
	}
	if info := reg.Routes()[0]; info.Overruns != 2 || info.Moved {
		t.Errorf("%+v", info)
	}
}
