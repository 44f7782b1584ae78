package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/bits"
	"net"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/handlerstate"
	"github.com/rpcd/rpcd/proto"
)

// A call's lifecycle, once a transport has found its route and set up its
// handler.Call, is run here whatever carries it: the reactor's event loop, its
// blocking pool and its streams, the HTTP gateway, and a client serving
// its server's calls and streams. The handler runs under the registry's
// middleware; a panic becomes an Internal error and is logged with its
// stack; a reply is held to the frame limit; a failure becomes an Error
// frame (or, for the gateway, an error to answer with) and is counted; and
// a call run inline on an event loop is shown to a watchdog and timed
// against the inline budget.

// DefaultInlineBudget is the time an inline run may take before it counts
// as over budget, when Runner.Budget is 0. A loop that runs handlers of a
// millisecond serves at most a thousand calls a second, every connection
// on it waiting its turn; a handler that needs longer belongs on the pool.
const DefaultInlineBudget = time.Millisecond

// The inline budget is measured on a sample of the runs, so that the hot
// path does not read the clock at every call: one inline call in
// sampleEvery on each connection is timed, and a route moves to the pool
// once moveAfter of its last window timed runs (an overrun the watchdog
// saw counts as one) were over budget.
const (
	window    = 16
	moveAfter = 8
)

// sampleEvery is a variable for the tests' sake.
var sampleEvery uint32 = 64

// Runner runs calls for a transport. A transport makes one, sets its
// fields once, and hands it every call; it is safe for concurrent use.
// The zero Runner runs calls under the defaults.
type Runner struct {
	// MaxFrame is the frame limit replies are held to: a reply whose
	// frame would be larger fails with ResourceExhausted. Default
	// proto.DefaultMaxFrameSize.
	MaxFrame int

	// Logger receives a handler's panic (with its stack), a one-way call's
	// failure (at Debug), an inline handler's first overrun (with the
	// stacks of the goroutines running inline handlers) and a route's
	// move to the blocking pool. Default slog.Default().
	Logger *slog.Logger

	// Failed, if set, is told the error of every call answered with an
	// Error: a handler's, a panic's, a reply over the frame limit, a Job's
	// Err. The reactor counts them by code.
	Failed func(err error)

	// Compress, if set, compresses the reply of a Job whose Zip is not
	// CompressionNone: the payload of the Response begun at out[start:],
	// with own after it (see Run), returning out and what is left of own.
	// It is asked before the reply is held to the frame limit.
	Compress func(out []byte, start int, own []byte, zip proto.Compression) ([]byte, []byte)

	// Budget is the time an inline run may take: a route whose timed
	// inline runs keep taking longer moves itself to the blocking pool
	// (logged once; Route.IsBlocking then holds, and handler.RouteInfo
	// says Moved), unless it was registered with handler.Inline. Default
	// DefaultInlineBudget; a negative Budget moves no route.
	Budget time.Duration
}

// Job is one call for Runner.Run: its route, the handler.Call its handler
// runs under, set up and started by the transport (Call.Start), and the
// request payload. The transport ends the Call (Call.End) once Run has
// returned.
type Job struct {
	Route  *handler.Route
	Call   *handler.Call
	Req    []byte
	OneWay bool              // no reply goes back: a failure is only logged, at Debug
	Zip    proto.Compression // the reply's compression, through Runner.Compress; CompressionNone for none
	Large  int               // a reply of Large bytes or more that the handler did not append in place comes back as own (Route.ServeOwn); 0 for never
	Watch  *Watch            // for a call run inline on an event loop: the loop's Watch; nil elsewhere
	Err    error             // if set, the call is answered with Err and its handler is not run
}

// Run runs j and appends what answers it to out: a Response, or an Error
// (its code from handler.CodeOf, flagged Unprocessed when
// AnswersUnprocessed holds), or nothing for a one-way call. A reply of
// j.Large bytes or more that the handler did not append in place comes
// back as own, to be written right after out: the Response's length counts
// it. Calls with a Watch are run as inline calls: the watchdog sees them
// (Check), and a sample of them is timed against the budget.
func (r *Runner) Run(j *Job, out []byte) (_, own []byte) {
	call := j.Call
	out, start := proto.BeginResponse(out, call.ID, call.Codec)
	large := j.Large
	if large <= 0 {
		large = math.MaxInt
	}
	err := j.Err
	switch {
	case err != nil:
	case j.Watch != nil:
		// Shown to the watchdog: two atomic adds, and a store when the
		// connection's route changes; one call in sampleEvery timed.
		w := j.Watch
		if w.route.Load() != j.Route {
			w.route.Store(j.Route)
		}
		w.seq.Add(1) // running
		if w.calls++; w.calls < sampleEvery {
			out, own, err = serveInline(call, j.Route, j.Req, out, large)
		} else {
			out, own, err = r.timeInline(j, out, large)
		}
		w.seq.Add(1) // returned
	default:
		out, own, err = j.Route.ServeOwn(call, j.Req, out, large)
	}
	if j.OneWay {
		if err != nil {
			r.logFailure(call, err, true)
		}
		return out[:start], nil
	}
	if err == nil {
		if j.Zip != proto.CompressionNone && r.Compress != nil {
			out, own = r.Compress(out, start, own, j.Zip)
		}
		n := proto.FinishFrameWith(out, start, len(own))
		if n <= r.maxFrame() {
			return out, own
		}
		err = r.tooLarge(n)
	}
	r.logFailure(call, err, false)
	if r.Failed != nil {
		r.Failed(err)
	}
	var flags proto.Flags
	if AnswersUnprocessed(err) {
		flags = proto.FlagUnprocessed
	}
	return proto.AppendError(out[:start], call.ID, flags, handler.CodeOf(err), handler.MessageOf(err)), nil
}

// Outcome runs a call whose answer is not a frame, the HTTP gateway's: it
// appends the reply payload to out and returns it, or the error to answer
// with instead, as Run would put it in an Error frame: the handler's, an
// Internal error for a panic (logged with its stack), or ResourceExhausted
// for a reply whose frame would pass MaxFrame.
func (r *Runner) Outcome(rt *handler.Route, call *handler.Call, req, out []byte) ([]byte, error) {
	out, err := rt.Serve(call, req, out)
	if err == nil {
		if n := proto.HeaderSize + len(out); n > r.maxFrame() { // a Response has no route or metadata
			err = r.tooLarge(n)
		}
	}
	if err != nil {
		r.logFailure(call, err, false)
		if r.Failed != nil {
			r.Failed(err)
		}
	}
	return out, err
}

// Stream runs a stream route's handler under call (its parent from
// WithStream) and returns its outcome, for the transport to finish the
// stream with: the handler's error, or an Internal error for a panic,
// logged with its stack. A failure is counted by Failed.
func (r *Runner) Stream(rt *handler.StreamRoute, call *handler.Call) error {
	err := rt.ServeStream(call)
	if err != nil {
		r.logFailure(call, err, false)
		if r.Failed != nil {
			r.Failed(err)
		}
	}
	return err
}

func (r *Runner) maxFrame() int {
	if r.MaxFrame <= 0 {
		return proto.DefaultMaxFrameSize
	}
	return r.MaxFrame
}

func (r *Runner) log() *slog.Logger {
	if r.Logger == nil {
		return slog.Default()
	}
	return r.Logger
}

func (r *Runner) budget() time.Duration {
	if r.Budget == 0 {
		return DefaultInlineBudget
	}
	return r.Budget
}

// tooLarge is the error of a reply whose frame has n bytes, over the limit.
func (r *Runner) tooLarge(n int) error {
	return handler.Errorf(proto.CodeResourceExhausted, "reply of %d bytes exceeds the frame limit of %d", n, r.maxFrame())
}

// logFailure logs a handler's panic with its stack, and a one-way call's
// failure at Debug, as nobody else hears of it.
func (r *Runner) logFailure(call *handler.Call, err error, oneWay bool) {
	var pe *handler.PanicError
	switch {
	case errors.As(err, &pe):
		r.log().Error("rpcd: handler panicked", "route", pe.Route, "remote", call.Remote, "panic", pe.Value, "stack", string(pe.Stack))
	case oneWay:
		r.log().Debug("rpcd: one-way call failed", "route", call.Route, "remote", call.Remote, "err", err)
	}
}

// Watch is where a watchdog sees the inline handler an event loop runs for
// one connection. The transport keeps a Watch per connection, passes it in
// Job.Watch with each inline call, and has a goroutine of its own call
// Check on every Watch a few times per threshold. The zero Watch is ready;
// a Watch must not be copied once used.
type Watch struct {
	// Written by the loop at every inline call; read by Check.
	seq   atomic.Uint64                 // odd while a handler runs: advanced as one starts and as it returns
	route atomic.Pointer[handler.Route] // the route of the call running, or of the last one

	calls uint32 // inline calls since the last timed one; the loop's own

	// Check's own: the run it saw, since when, and whether it told of it.
	seen  uint64
	since time.Time
	told  bool
}

// timeInline runs an inline call that is timed against the budget,
// unless the route cannot move.
func (r *Runner) timeInline(j *Job, out []byte, large int) ([]byte, []byte, error) {
	j.Watch.calls = 0
	rt := j.Route
	if st := routeState(rt); r.Budget < 0 || st.Pinned || st.Moved.Load() {
		return serveInline(j.Call, rt, j.Req, out, large)
	}
	began := time.Now()
	out, own, err := serveInline(j.Call, rt, j.Req, out, large)
	r.ran(rt, time.Since(began) > r.budget())
	return out, own, err
}

// Check is the watchdog's look at w at time now. An inline handler seen
// running the same call for threshold or more has overrun: once per run,
// it is counted on its route (handler.RouteInfo.Overruns), counted as a
// run over budget, and, the first time for the route, logged at Warn with
// the stacks of the goroutines running inline handlers, the stuck one
// among them. Looking every threshold/2, Check reports a handler that has
// run between threshold and 1.5×threshold, never one that ran less than
// threshold. remote is the connection's, for the log. Only one goroutine
// may call Check on a Watch.
func (r *Runner) Check(w *Watch, now time.Time, threshold time.Duration, remote net.Addr) {
	seq := w.seq.Load()
	switch {
	case seq&1 == 0: // no handler runs
		w.seen = 0
		return
	case seq != w.seen: // a run not seen before
		w.seen, w.since, w.told = seq, now, false
		return
	case w.told || now.Sub(w.since) < threshold:
		return
	}
	rt := w.route.Load()
	if w.seq.Load() != seq { // it has just returned: rt may be the next call's
		return
	}
	w.told = true
	st := routeState(rt)
	if st.Logged.CompareAndSwap(false, true) { // before the count, so that whoever sees the count can read the log
		r.log().Warn("rpcd: an inline handler holds its event loop past the watchdog's threshold; every connection on the loop waits",
			"route", rt.Name(), "running", now.Sub(w.since).Round(time.Millisecond), "threshold", threshold, "remote", remote,
			"remedy", "register the route with handler.Blocking()", "stack", inlineStacks())
	}
	st.Overruns.Add(1)
	r.ran(rt, true)
}

// ran records a timed inline run of rt, over budget or not, and moves rt
// to the blocking pool once moveAfter of its last window runs were over.
func (r *Runner) ran(rt *handler.Route, over bool) {
	st := routeState(rt)
	if r.Budget < 0 || st.Pinned || st.Moved.Load() {
		return
	}
	var b uint32
	if over {
		b = 1
	}
	for {
		old := st.Runs.Load()
		if old == 0 && !over {
			return // the common case: nothing over budget to remember
		}
		runs := old<<1&(1<<window-1) | b
		if !st.Runs.CompareAndSwap(old, runs) {
			continue
		}
		if n := bits.OnesCount32(runs); over && n >= moveAfter && st.Moved.CompareAndSwap(false, true) {
			r.log().Warn("rpcd: route moved from the event loop to the blocking pool: its inline runs keep passing their budget",
				"route", rt.Name(), "budget", r.budget(), "over", fmt.Sprintf("%d of its last %d timed runs", n, window),
				"remedy", "register it with handler.Blocking(), or with handler.Inline() to keep it on the loop")
		}
		return
	}
}

// serveInline is Route.ServeOwn for a call run inline on an event loop: a
// function of its own, so that a goroutine's stack tells a watchdog which
// goroutine is an event loop held by a handler (Check). The compiler may
// inline it: a stack shows inlined calls as frames all the same.
func serveInline(ctx context.Context, rt *handler.Route, req, buf []byte, large int) (out, own []byte, err error) {
	return rt.ServeOwn(ctx, req, buf, large)
}

// inlineFrame is how serveInline shows in a stack.
const inlineFrame = "rpcd/handler/transport.serveInline("

// routeState returns what handler keeps of a route beside its handler:
// its run state, reached through the accessor handler sets in its init.
// It is asked on a timed run, one inline call in sampleEvery, and by the
// watchdog, never on a call's common path.
var routeState = handlerstate.RouteOf.(func(*handler.Route) *handlerstate.Route)

// inlineStacks returns the stacks of the goroutines that are running an
// inline handler now: the one the watchdog found stuck, and any other
// loop that is in a handler at that moment. Taking them stops the world
// for a moment, which the watchdog does once per route.
func inlineStacks() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) || len(buf) >= 64<<20 {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out bytes.Buffer
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte(inlineFrame)) {
			out.Write(g)
			out.WriteString("\n\n")
		}
	}
	if out.Len() == 0 {
		return "(the handler returned before its stack was taken)"
	}
	return out.String()
}
