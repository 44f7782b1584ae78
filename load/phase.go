package load

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/internal/cputime"
	"github.com/rpcd/rpcd/internal/loadgen"
)

// phase is what the driver (asyncDriver) keeps of a phase of its calls,
// which start begins, swap moves to another Recorder while the calls go on
// (a soak's windows) and stop ends: the Recorder its connections record
// into, whether calls are made, the limit and counts of calls, and the
// first message of each kind of error.
type phase struct {
	rec     atomic.Pointer[loadgen.Recorder]
	running atomic.Bool  // calls are made: between start and stop
	limit   atomic.Int64 // calls to start in this phase; 0 for no limit
	started atomic.Int64 // calls started in this phase
	flying  atomic.Int64 // calls in flight

	firstMu sync.Mutex
	first   map[string]string // the first message of each kind of error
}

// begin starts a phase recorded in rec, of at most limit calls if it is
// positive.
func (p *phase) begin(rec *loadgen.Recorder, limit int64) {
	p.rec.Store(rec)
	p.started.Store(0)
	p.limit.Store(limit)
	p.running.Store(true)
}

// take counts a call about to start, and reports whether the phase's
// limit lets it.
func (p *phase) take() bool {
	lim := p.limit.Load()
	return lim <= 0 || p.started.Add(1) <= lim
}

// drain ends the phase's calls: none starts from now on, and it waits for
// those in flight to end, for at most wait.
func (p *phase) drain(wait time.Duration) {
	p.running.Store(false)
	for end := time.Now().Add(wait); p.flying.Load() > 0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
}

// waitPhase waits for dur to pass (for ever if it is 0), for ctx to end or,
// with a limit, for every call of the phase to have started.
func (p *phase) waitPhase(ctx context.Context, dur time.Duration) {
	var over <-chan time.Time
	if dur > 0 {
		t := time.NewTimer(dur)
		defer t.Stop()
		over = t.C
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-over:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
			if lim := p.limit.Load(); lim > 0 && p.started.Load() >= lim {
				return
			}
		}
	}
}

// takeFirstErrors returns the first message of each kind of error since
// the last time, and forgets them.
func (p *phase) takeFirstErrors() map[string]string {
	p.firstMu.Lock()
	defer p.firstMu.Unlock()
	m := p.first
	p.first = map[string]string{}
	return m
}

// noteKind keeps msg if it is the first error of its kind.
func (p *phase) noteKind(kind, msg string) {
	p.firstMu.Lock()
	if p.first == nil {
		p.first = map[string]string{}
	}
	if _, ok := p.first[kind]; !ok {
		p.first[kind] = msg
	}
	p.firstMu.Unlock()
}

// connTally is a connection's share of its driver's Recorder: Tally
// number i of the one it records into.
type connTally struct {
	i     int
	rec   *loadgen.Recorder
	tally *loadgen.Tally // nil between phases
}

// rebind moves the figures into their Recorder and takes cur, the
// driver's current one; with the connection's lock held.
func (t *connTally) rebind(cur *loadgen.Recorder) {
	if t.rec == cur {
		return
	}
	if t.tally != nil {
		t.tally.Flush()
	}
	t.rec, t.tally = cur, nil
	if cur != nil {
		t.tally = cur.Tally(t.i)
	}
}

// runPhased runs cfg's load on d: a warm-up phase, then the measured one,
// in measured.
func runPhased(ctx context.Context, cfg Config, d *asyncDriver, measured func(func() error) error) (loadgen.Result, map[string]string, error) {
	defer d.close()
	if cfg.Progress != nil {
		cfg.Progress(Progress{Starting: true})
	}
	if cfg.Warmup > 0 {
		d.start(loadgen.NewRecorder(cfg.Conns), 0)
		d.waitPhase(ctx, cfg.Warmup)
		d.stop()
		if ctx.Err() != nil {
			return loadgen.Result{}, nil, ctx.Err()
		}
	}
	d.takeFirstErrors() // the warm-up's
	rec := loadgen.NewRecorder(cfg.Conns)
	cpu0 := cputime.Process()
	began := time.Now()
	var report func(loadgen.Progress)
	if cfg.Progress != nil {
		report = func(p loadgen.Progress) {
			cfg.Progress(Progress{Elapsed: p.Elapsed, Calls: p.Calls, Errors: p.Errors})
		}
	}
	stopReports := rec.ReportEverySecond(began, report)
	var elapsed, cpu time.Duration
	_ = measured(func() error {
		d.start(rec, cfg.Calls)
		d.waitPhase(ctx, cfg.Duration)
		d.stop()
		elapsed = time.Since(began)
		cpu = cputime.Process() - cpu0
		return nil
	})
	stopReports()
	return rec.Result(elapsed, cpu), d.takeFirstErrors(), nil
}
