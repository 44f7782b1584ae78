package loadgen

import "time"

// Recorder sums the calls of a load that makes them its own way rather
// than through Run's callers: a driver that keeps many calls in flight per
// goroutine, say. It has Tallies, each owned by one goroutine at a time
// (or used under a lock of the driver's), and Result sums them as Run sums
// its callers: the same histogram, percentiles and error counts.
type Recorder struct{ t *tally }

// NewRecorder returns a Recorder with n Tallies, numbered 0 to n-1, which
// share a few histogram shards as Run's callers do.
func NewRecorder(n int) *Recorder { return &Recorder{newTally(max(n, 1))} }

// Tally returns Tally number i.
func (r *Recorder) Tally(i int) *Tally { return (*Tally)(r.t.callers[i]) }

// Progress sums the calls and errors recorded so far; any goroutine may
// call it while the Tallies are in use. A Tally in use tells its calls
// tallyPublish at a time, so each may be short by fewer than that until it
// is flushed.
func (r *Recorder) Progress() (calls, errors int64) { return r.t.progress() }

// ReportEverySecond calls report, if not nil, with the figures recorded
// since start once a second, as Run does for Config.Progress, until the
// returned stop, which waits for the last call to end.
func (r *Recorder) ReportEverySecond(start time.Time, report func(Progress)) (stop func()) {
	return reportEverySecond(start, r.t, report)
}

// Result sums the Tallies, each flushed (Tally.Flush) and no longer in
// use, over elapsed, with cpu the CPU time the calls cost.
func (r *Recorder) Result(elapsed, cpu time.Duration) Result { return summarize(r.t, elapsed, cpu) }

// Tally is one goroutine's share of a Recorder.
type Tally caller

// Done records a call answered as expected after latency, which moved
// bytes; busy is the time it took from its actual start (Result.BusySec).
func (t *Tally) Done(latency, busy time.Duration, bytes int) {
	t.calls++
	t.bytes += int64(bytes)
	t.busy += busy
	t.lat[t.nlat] = int64(latency)
	if t.nlat++; t.nlat == len(t.lat) {
		(*caller)(t).record()
	}
	t.publish()
}

// tallyPublish is how many calls a Tally in use tells Progress at a time,
// not each (a locked instruction a call was 2 % of a load generator's CPU
// at 1 × 128).
const tallyPublish = 32

// publish tells Progress the Tally's calls every tallyPublish of them.
func (t *Tally) publish() {
	if t.calls%tallyPublish == 0 {
		t.done.Store(t.calls)
	}
}

// Sent records a call that has no answer to time (a one-way call, a
// publish), made as expected and moving bytes: counted, with no latency.
func (t *Tally) Sent(bytes int) {
	t.calls++
	t.bytes += int64(bytes)
	t.publish()
}

// Failed records a call that failed, of the kind given (Config.Classify's
// names), after busy from its actual start.
func (t *Tally) Failed(kind string, busy time.Duration) {
	t.calls++
	t.busy += busy
	t.errors[kind]++
	t.failed.Add(1)
	t.done.Store(t.calls)
}

// Flush moves the latencies the Tally holds into its histogram shard.
func (t *Tally) Flush() {
	(*caller)(t).record()
	t.done.Store(t.calls)
}
