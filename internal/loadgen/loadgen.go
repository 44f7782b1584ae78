package loadgen

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/rpcd/rpcd/internal/cputime"
)

// ErrWrongReply is what a CallFunc returns for a reply that arrived but is
// not the one expected (an echo that differs, a sum that is wrong).
var ErrWrongReply = errors.New("rpcd: wrong reply")

// CallFunc makes one call for caller number worker (0 to Callers-1) and
// returns the bytes it moved, request and reply together.
type CallFunc func(ctx context.Context, worker int) (bytes int, err error)

// Config shapes a run. Callers and one of Duration or Calls are required.
type Config struct {
	Callers  int           // concurrent callers
	Duration time.Duration // how long to measure; ignored if Calls > 0
	Calls    int64         // how many calls to measure, in total
	Warmup   time.Duration // calls before measuring, not counted

	// Rate, if positive, makes the load open-loop: this many calls per
	// second in total, spread evenly over the callers, each latency counted
	// from the call's scheduled start.
	Rate float64

	// Classify names an error for the per-kind counts; default: the
	// error's text, "wrong reply" for ErrWrongReply.
	Classify func(error) string

	// Progress, if set, is called about once a second with the figures so
	// far (a live progress line).
	Progress func(Progress)
}

// Progress is a run's state while it runs.
type Progress struct {
	Elapsed time.Duration
	Calls   int64
	Errors  int64
}

// Result is a finished run.
type Result struct {
	Calls       int64            `json:"calls"`
	Errors      int64            `json:"errors"`
	ErrorsBy    map[string]int64 `json:"errors_by,omitempty"`
	Elapsed     time.Duration    `json:"-"`
	CallsPerSec float64          `json:"calls_per_sec"`
	BytesPerSec float64          `json:"bytes_per_sec"`
	MeanUS      float64          `json:"mean_us"`
	P50US       float64          `json:"p50_us"`
	P90US       float64          `json:"p90_us"`
	P99US       float64          `json:"p99_us"`
	P999US      float64          `json:"p999_us"`
	MaxUS       float64          `json:"max_us"`
	// BusySec is the time the callers spent in calls, from each call's
	// actual start to its end, summed over the callers. Against Callers ×
	// Elapsed it says how busy they were: an open loop that falls short of
	// its Rate with its callers busy all the time had too few callers for
	// the calls' latency; BusySec / Calls is that latency, without the wait
	// behind the schedule that P50US and the others count.
	BusySec float64 `json:"busy_sec"`
	// CPUPerCall is this process's user+system CPU time over the measured
	// part of the run, divided by the calls: the load generator's side of
	// the bill (and the server's too, when it runs in this process).
	CPUPerCallUS float64 `json:"cpu_per_call_us"`
}

// Histograms record nanoseconds from 100ns to 2 minutes at 3 significant
// digits.
func newHistogram() *hdrhistogram.Histogram { return hdrhistogram.New(100, 120e9, 3) }

// histShard is a latency histogram a few callers share, under a lock. One
// per caller would need no lock, but a histogram takes about 256 KiB: 2.5
// GiB for the 10,000 callers of a soak.
type histShard struct {
	mu   sync.Mutex
	hist *hdrhistogram.Histogram
	_    [48]byte // keep the shards' locks off each other's cache lines
}

// histShards is how many shards a phase with n callers has: enough that
// callers seldom wait for a lock.
func histShards(n int) int { return min(n, 4*runtime.GOMAXPROCS(0)) }

// caller is one caller's own tallies, merged at the end so callers never
// share a lock but their histogram shard's, which they take once per
// len(lat) calls.
type caller struct {
	shard  *histShard
	calls  int64
	bytes  int64
	busy   time.Duration // in calls: Result.BusySec
	errors map[string]int64
	lat    [32]int64 // latencies not yet in the shard
	nlat   int
	wake   chan struct{} // open loop: the pacer's word that the call awaited is due

	// done and failed mirror calls and the errors for the progress line,
	// which reads them while the caller runs.
	done, failed atomic.Int64
	_            [48]byte // keep callers' counters off each other's cache lines
}

// Run runs the load until the duration or the number of calls is reached,
// or ctx ends, and returns what it measured. An error means the run could
// not be made (a bad Config); failed calls are counted, not returned.
func Run(ctx context.Context, cfg Config, call CallFunc) (Result, error) {
	if cfg.Callers <= 0 {
		return Result{}, fmt.Errorf("rpcd: loadgen: %d callers, want at least 1", cfg.Callers)
	}
	if cfg.Calls <= 0 && cfg.Duration <= 0 {
		return Result{}, errors.New("rpcd: loadgen: neither a duration nor a number of calls")
	}
	if cfg.Rate < 0 {
		return Result{}, fmt.Errorf("rpcd: loadgen: rate %v, want 0 (closed loop) or more", cfg.Rate)
	}
	if cfg.Classify == nil {
		cfg.Classify = classify
	}

	if cfg.Warmup > 0 {
		wctx, cancel := context.WithTimeout(ctx, cfg.Warmup)
		warm := cfg
		warm.Calls, warm.Duration, warm.Warmup, warm.Progress = 0, cfg.Warmup, 0, nil
		runPhase(wctx, warm, call, newTally(cfg.Callers))
		cancel()
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
	}

	t := newTally(cfg.Callers)
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.Calls <= 0 {
		var stop context.CancelFunc
		mctx, stop = context.WithTimeout(mctx, cfg.Duration)
		defer stop()
	}
	cpu0 := cputime.Process()
	start := time.Now()
	stop := reportEverySecond(start, t, cfg.Progress)
	runPhase(mctx, cfg, call, t)
	elapsed := time.Since(start)
	cpu := cputime.Process() - cpu0
	stop() // no Progress call after Run returns
	return summarize(t, elapsed, cpu), nil
}

// reportEverySecond calls report, if not nil, with t's figures since start
// once a second until the returned stop, which waits for the last call.
func reportEverySecond(start time.Time, t *tally, report func(Progress)) (stop func()) {
	if report == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				calls, errs := t.progress()
				report(Progress{Elapsed: time.Since(start), Calls: calls, Errors: errs})
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// newTally returns the tallies of a phase with n callers.
func newTally(n int) *tally {
	t := &tally{callers: make([]*caller, n), shards: make([]*histShard, histShards(n))}
	for i := range t.shards {
		t.shards[i] = &histShard{hist: newHistogram()}
	}
	for i := range t.callers {
		t.callers[i] = &caller{shard: t.shards[i%len(t.shards)], errors: map[string]int64{}}
	}
	return t
}

// tally counts a phase's calls across its callers.
type tally struct {
	started atomic.Int64 // calls begun, against Config.Calls
	callers []*caller    // for the progress line
	shards  []*histShard
}

// progress sums the callers' counts so far.
func (t *tally) progress() (calls, errors int64) {
	for _, cl := range t.callers {
		calls += cl.done.Load()
		errors += cl.failed.Load()
	}
	return calls, errors
}

// runPhase runs the callers until ctx ends or cfg.Calls have begun. In an
// open loop one pacer goroutine wakes the callers whose calls are due,
// from a Wheel: no caller has a runtime timer of its own.
func runPhase(ctx context.Context, cfg Config, call CallFunc, t *tally) {
	var wg, pacing sync.WaitGroup
	start := time.Now()
	var pace *Wheel[*caller]
	stop := make(chan struct{})
	if cfg.Rate > 0 {
		pace = new(Wheel[*caller])
		for _, cl := range t.callers {
			cl.wake = make(chan struct{}, 1) // a caller waits for one call at a time
		}
		pacing.Add(1)
		go func() {
			defer pacing.Done()
			pace.Pace(stop, func() time.Duration { return time.Since(start) }, wakeCaller)
		}()
	}
	for i, cl := range t.callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl.run(ctx, cfg, call, t, i, start, pace)
		}()
	}
	wg.Wait()
	close(stop)
	pacing.Wait()
}

// wakeCaller is the pacer's: the caller's call is due. Never blocks: the
// caller is in the wheel once at a time, and takes each wake before it
// waits again.
func wakeCaller(e Entry[*caller], _ time.Duration) { e.Item.wake <- struct{}{} }

// run makes caller i's calls until the phase ends.
//
// Its clock is the time since start on the monotonic clock alone
// (time.Since), which reads one clock where time.Now reads two: with many
// callers on a fast system, a call's one clock read was a twentieth of the
// load process's CPU.
//
// In an open loop (pace not nil) a caller ahead of its schedule puts
// itself in pace's wheel at its next call's time and waits for the pacer
// to wake it, at most a tick late; one behind it calls at once.
func (cl *caller) run(ctx context.Context, cfg Config, call CallFunc, t *tally, i int, start time.Time, pace *Wheel[*caller]) {
	defer cl.record() // what is left, before the phase's figures are summed
	var interval, next time.Duration
	if cfg.Rate > 0 {
		interval = time.Duration(float64(cfg.Callers) / cfg.Rate * float64(time.Second))
		next = time.Duration(float64(i) / cfg.Rate * float64(time.Second))
	}
	// The end of the phase: its context's channel and deadline, read once.
	// A context's deadline can pass a moment before its timer cancels it,
	// and a client that checks deadlines itself fails calls in that
	// moment; those failures are the end of the run, not errors.
	done := ctx.Done()
	deadline, hasEnd := ctx.Deadline()
	end := deadline.Sub(start)
	over := func(now time.Duration) bool {
		select {
		case <-done:
			return true
		default:
			return hasEnd && now >= end
		}
	}
	now := time.Since(start)
	for !over(now) {
		if cfg.Calls > 0 && t.started.Add(1) > cfg.Calls {
			return
		}
		// One clock read per call: a call begins when the previous one
		// ended, give or take the few nanoseconds of counting it.
		began, sent := now, now
		if interval > 0 {
			sent = time.Since(start)
			if next > sent {
				pace.Add(cl, next)
				select {
				case <-cl.wake:
				case <-done:
					return
				}
				sent = time.Since(start) // up to a tick after next
			}
			began = next // latency counts from the schedule
			next += interval
		}
		n, err := call(ctx, i)
		now = time.Since(start)
		cl.busy += now - sent
		if err != nil && over(now) {
			return // cut off by the end of the run, not a failure
		}
		cl.calls++
		cl.bytes += int64(n)
		if err != nil {
			cl.errors[cfg.Classify(err)]++
			cl.failed.Add(1)
		} else {
			cl.lat[cl.nlat] = int64(now - began)
			if cl.nlat++; cl.nlat == len(cl.lat) {
				cl.record()
			}
		}
		cl.done.Add(1)
	}
}

// record moves the latencies the caller holds into its histogram shard.
func (cl *caller) record() {
	cl.shard.mu.Lock()
	for _, ns := range cl.lat[:cl.nlat] {
		_ = cl.shard.hist.RecordValue(ns)
	}
	cl.shard.mu.Unlock()
	cl.nlat = 0
}

func summarize(t *tally, elapsed, cpu time.Duration) Result {
	h := newHistogram()
	for _, sh := range t.shards {
		h.Merge(sh.hist)
	}
	r := Result{Elapsed: elapsed, ErrorsBy: map[string]int64{}}
	var bytes int64
	var busy time.Duration
	for _, cl := range t.callers {
		r.Calls += cl.calls
		bytes += cl.bytes
		busy += cl.busy
		for k, v := range cl.errors {
			r.ErrorsBy[k] += v
			r.Errors += v
		}
	}
	if len(r.ErrorsBy) == 0 {
		r.ErrorsBy = nil
	}
	r.BusySec = busy.Seconds()
	secs := elapsed.Seconds()
	if secs > 0 {
		r.CallsPerSec = float64(r.Calls) / secs
		r.BytesPerSec = float64(bytes) / secs
	}
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	if h.TotalCount() > 0 {
		r.MeanUS = h.Mean() / 1e3
		r.P50US = us(h.ValueAtQuantile(50))
		r.P90US = us(h.ValueAtQuantile(90))
		r.P99US = us(h.ValueAtQuantile(99))
		r.P999US = us(h.ValueAtQuantile(99.9))
		r.MaxUS = us(h.Max())
	}
	if r.Calls > 0 {
		r.CPUPerCallUS = float64(cpu.Microseconds()) / float64(r.Calls)
	}
	return r
}

// ErrorKinds returns the error kinds of r sorted by name.
func (r Result) ErrorKinds() []string {
	kinds := make([]string, 0, len(r.ErrorsBy))
	for k := range r.ErrorsBy {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return kinds
}

func classify(err error) string {
	if errors.Is(err, ErrWrongReply) {
		return "wrong reply"
	}
	return err.Error()
}
