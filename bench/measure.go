package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/bench/internal/cputime"
	"github.com/rpcd/rpcd/internal/loadgen"
)

// cell is one load shape: Conns connections with PerConn callers each, all
// echoing Payload bytes.
type cell struct {
	Name    string `json:"name"`
	Conns   int    `json:"conns"`
	PerConn int    `json:"callers_per_conn"`
	Payload int    `json:"payload_bytes"`
}

func (c cell) callers() int { return c.Conns * c.PerConn }

func (c cell) describe() string {
	conns := "conns"
	if c.Conns == 1 {
		conns = "conn"
	}
	callers := "callers"
	if c.PerConn == 1 {
		callers = "caller"
	}
	return fmt.Sprintf("%d %s × %d %s, %s payload", c.Conns, conns, c.PerConn, callers, sizeName(c.Payload))
}

func sizeName(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d B", n)
}

// allCells are the cells a full run measures, in table order.
var allCells = []cell{
	{"1x1-16B", 1, 1, 16},
	{"4x1-16B", 4, 1, 16},
	{"100x1-16B", 100, 1, 16},
	{"1x128-16B", 1, 128, 16},
	{"1x1-2000B", 1, 1, 2000},
	{"4x1-2000B", 4, 1, 2000},
	{"100x1-2000B", 100, 1, 2000},
	{"1x128-2000B", 1, 128, 2000},
	{"1x1-1MiB", 1, 1, 1 << 20},
}

// smokeCell is the one tiny cell of -smoke.
var smokeCell = cell{"smoke-1x1-16B", 1, 1, 16}

// runResult is one measurement of one system in one cell.
type runResult struct {
	Run      int              `json:"run"`
	Position int              `json:"position"` // 0-based place in this run's order of systems
	Calls    int64            `json:"calls"`
	Errors   int64            `json:"errors"`
	ErrorsBy map[string]int64 `json:"errors_by,omitempty"`
	Failed   string           `json:"failed,omitempty"` // the run could not be made
	failErr  error            // Failed as an error, where there is one

	CallsPerSec float64 `json:"calls_per_sec"`
	MBPerSec    float64 `json:"mb_per_sec"` // request plus reply payload
	P50US       float64 `json:"p50_us"`
	P99US       float64 `json:"p99_us"`
	// CPUPerCallUS is ClientCPUPerCallUS plus ServerCPUPerCallUS.
	CPUPerCallUS       float64 `json:"cpu_per_call_us"`
	ClientCPUPerCallUS float64 `json:"client_cpu_per_call_us"`
	ServerCPUPerCallUS float64 `json:"server_cpu_per_call_us"`
}

// ok reports whether the run produced figures.
func (r runResult) ok() bool { return r.Failed == "" && r.Calls > r.Errors }

// load is one phase's per-caller buffers: a request each (a pattern of its
// own, stamped with a sequence number per call) and a reply buffer each.
type load struct {
	ctx     context.Context // the calls' context, not loadgen's (see call)
	cl      caller
	callers []*loadSlot
}

// loadSlot is one caller's part of a load, which no other caller writes: in
// slices shared by all the callers, each call's writes to its sequence
// number and reply slice made the cache lines under them bounce between the
// CPUs (1.5 % of the 128-caller client's CPU profile).
type loadSlot struct {
	req, reply []byte
	seq        uint64
	_          [64]byte // the next slot's allocation starts a line of its own
}

func newLoad(ctx context.Context, cl caller, callers, payload int) *load {
	l := &load{ctx: ctx, cl: cl, callers: make([]*loadSlot, callers)}
	for w := range callers {
		s := &loadSlot{req: make([]byte, payload), reply: make([]byte, 0, payload)}
		fillPattern(s.req, w)
		l.callers[w] = s
	}
	return l
}

// call is the loadgen.CallFunc: one echo, checked byte for byte.
//
// It ignores loadgen's context, whose deadline ends the run, and calls with
// l.ctx, which has no deadline and ends only if the run stalls: loadgen then
// starts no new call once the run's time is up, and the calls in flight
// finish normally, counted, instead of being cancelled. Cancelling them
// would close a drpc connection (drpc ends a connection whose call is
// cancelled), and rpcd's client fails a call whose deadline has passed before
// the context's timer fires, which loadgen would count as an error.
func (l *load) call(_ context.Context, w int) (int, error) {
	s := l.callers[w]
	s.seq++
	stampSeq(s.req, s.seq)
	got, err := l.cl.call(l.ctx, w, s.req, s.reply)
	if err != nil {
		return 0, err
	}
	s.reply = got
	if err := checkEcho(s.req, got); err != nil {
		return 0, err
	}
	return 2 * len(s.req), nil
}

// stallGrace is how long past its planned end a measurement may run before
// its connections are closed under it (a system whose calls do not heed
// their context would otherwise hang the benchmark).
const stallGrace = 20 * time.Second

// errStalled marks a measurement whose calls did not end with its run.
var errStalled = errors.New("bench: calls still waiting after the run, connections closed")

// measure runs one system in one cell against srv: dial, one probe call per
// connection, warm-up, then the measured run. The measured window's CPU is
// this process's (getrusage) plus the server process's (/proc/PID/stat).
func measure(sys system, srv *server, c cell, d, warmup time.Duration, calls int64) runResult {
	var r runResult
	if !srv.alive() {
		r.Failed = errServerDied.Error()
		return r
	}
	cl, err := sys.dial(srv.addr, c.Conns)
	if err != nil {
		r.Failed = "dial: " + err.Error()
		return r
	}
	var stalled atomic.Bool
	callCtx, cancelCalls := context.WithCancel(context.Background())
	var once sync.Once
	closeOnce := func() { once.Do(func() { cancelCalls(); _ = cl.close() }) }
	defer closeOnce()

	// One call on each connection first: it checks the echo, and lazy
	// clients (gRPC) finish connecting outside the measurement.
	probe := newLoad(callCtx, cl, c.Conns, c.Payload)
	for w := range c.Conns {
		t := time.AfterFunc(10*time.Second, closeOnce)
		_, err := probe.call(context.Background(), w)
		t.Stop()
		if err != nil {
			r.failErr = fmt.Errorf("first call on connection %d: %w", w, err)
			r.Failed = r.failErr.Error()
			return r
		}
	}

	limit := warmup + d + stallGrace
	if calls > 0 {
		limit = warmup + time.Minute
	}
	watchdog := time.AfterFunc(limit, func() {
		stalled.Store(true)
		closeOnce()
	})
	defer watchdog.Stop()

	ctx := context.Background()
	if warmup > 0 {
		if _, err := loadgen.Run(ctx, loadgen.Config{Callers: c.callers(), Duration: warmup}, newLoad(callCtx, cl, c.callers(), c.Payload).call); err != nil {
			r.Failed = "warm-up: " + err.Error()
			return r
		}
	}
	runtime.GC() // garbage left by the previous measurement is not this one's bill

	cfg := loadgen.Config{Callers: c.callers(), Duration: d, Calls: calls}
	l := newLoad(callCtx, cl, c.callers(), c.Payload)
	srv0, err0 := srv.cpu()
	cli0 := cputime.Self()
	res, err := loadgen.Run(ctx, cfg, l.call)
	cli := cputime.Self() - cli0
	srv1, err1 := srv.cpu()
	if err != nil {
		r.Failed = err.Error()
		return r
	}
	if stalled.Load() {
		r.Failed = errStalled.Error()
	}
	if !srv.alive() {
		r.Failed = errServerDied.Error()
	}
	r.Calls, r.Errors, r.ErrorsBy = res.Calls, res.Errors, res.ErrorsBy
	// Only answered calls count; loadgen's CallsPerSec counts failed ones
	// too.
	if secs := res.Elapsed.Seconds(); secs > 0 {
		r.CallsPerSec = float64(res.Calls-res.Errors) / secs
	}
	r.MBPerSec = r.CallsPerSec * float64(2*c.Payload) / 1e6
	r.P50US, r.P99US = res.P50US, res.P99US
	if answered := res.Calls - res.Errors; answered > 0 {
		n := float64(answered)
		r.ClientCPUPerCallUS = float64(cli.Nanoseconds()) / 1e3 / n
		if err0 == nil && err1 == nil {
			r.ServerCPUPerCallUS = float64((srv1 - srv0).Nanoseconds()) / 1e3 / n
		}
		r.CPUPerCallUS = r.ClientCPUPerCallUS + r.ServerCPUPerCallUS
	}
	return r
}
