package load

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/loadgen"
	"github.com/rpcd/rpcd/proto"
)

// Config is a call load for Bench: Scenario called by Conns clients with
// Inflight callers each, for Duration after Warmup, or for Calls calls.
// The zero Config but for Addr is a valid one: NoArg from one caller for
// 5 s.
type Config struct {
	// Addr is the server: "host:port", "unix:///path", or a service
	// target, "scheme://authority/NAME" as client.DialService takes it
	// (import the package of its scheme, discovery/etcd or discovery/dns),
	// which each client reaches through a *client.Cluster with a
	// connection to every node.
	Addr string
	// Client is the options each client is dialled with; its Conns is
	// ignored: each client has one connection (to each node of a
	// service). In a closed loop (Rate 0) its WaitForReady is set.
	Client client.Options
	// Cluster, if not nil and Addr is a service target, adjusts the
	// options of client number i (0 to Conns-1) before it is dialled: its
	// balancing, say.
	Cluster func(opts *client.ServiceOptions, i int)

	Scenario Scenario      // the load; NoArg if its NewCall is nil
	Conns    int           // clients, each its own connection; 1 if 0
	Inflight int           // concurrent callers per client; 1 if 0
	Duration time.Duration // how long to measure; 5 s if neither it nor Calls is set
	Calls    int64         // measure this many calls in total instead of running for Duration
	Warmup   time.Duration // how long to call before measuring, calls not counted
	// Rate, if positive, makes the load open loop: this many calls/s in
	// total, each call's latency counted from its scheduled start, so that
	// a stalled server shows. 0 is closed loop: each caller calls as soon
	// as its previous reply came.
	Rate    float64
	Timeout time.Duration // each call's deadline, and bound on dialling a service node; 5 s if 0

	// ServerCPU, if not nil, returns the CPU time the server has used so
	// far; Bench reads it before and after the measured part of the run
	// for the report's ServerCPUPerCallUS. ServerCPUFromStats makes one
	// for a server that serves builtin.Stats.
	ServerCPU func() (time.Duration, error)

	// Progress, if not nil, is told of the run as it goes (a live
	// display): see Progress.
	Progress func(Progress)

	// Replay, if not nil, makes the run a replay of its recording instead
	// of a scenario: Bench runs Replay with this Config's Addr, Client,
	// Duration (0: until the replay's loops end), Timeout, ServerCPU and
	// Progress in place of Replay's own, and ignores the rest.
	Replay *ReplayConfig
}

// Progress is the state of a run while it runs. Bench passes one with
// Starting set once its clients are connected, before the warm-up, then
// one about once a second while it measures.
type Progress struct {
	Starting bool          // the run begins: nothing measured yet
	Elapsed  time.Duration // of the measured part
	Calls    int64         // calls made, failed ones included
	Errors   int64
}

// Defaults of Config.
const (
	defaultDuration = 5 * time.Second
	defaultTimeout  = 5 * time.Second
)

// withDefaults returns cfg with its defaults filled in, or an error for a
// field that cannot work.
func (cfg Config) withDefaults() (Config, error) {
	switch {
	case cfg.Addr == "":
		return cfg, errors.New("rpcd: load: no Addr")
	case cfg.Conns < 0 || cfg.Inflight < 0:
		return cfg, fmt.Errorf("rpcd: load: Conns %d, Inflight %d; want 0 (1) or more", cfg.Conns, cfg.Inflight)
	case cfg.Calls < 0 || cfg.Duration < 0 || cfg.Warmup < 0 || cfg.Timeout < 0:
		return cfg, errors.New("rpcd: load: a negative Calls, Duration, Warmup or Timeout")
	case cfg.Rate < 0 || math.IsNaN(cfg.Rate) || math.IsInf(cfg.Rate, 0):
		return cfg, fmt.Errorf("rpcd: load: Rate %v, want 0 (closed loop) or more", cfg.Rate)
	}
	if cfg.Scenario.NewCall == nil {
		cfg.Scenario = scenarios[0] // NoArg
	}
	cfg.Conns = max(cfg.Conns, 1)
	cfg.Inflight = max(cfg.Inflight, 1)
	if cfg.Calls > 0 {
		cfg.Duration = 0
	} else if cfg.Duration == 0 {
		cfg.Duration = defaultDuration
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultTimeout
	}
	return cfg, nil
}

// Bench connects to cfg.Addr, runs the load of cfg and returns what it
// measured. Calls that fail are counted in the report, by kind, not
// returned: an error means the run could not be made (the server could
// not be reached, ctx ended before the measuring began, a Config that
// cannot work). If ctx ends while it measures, the report covers the calls
// made until then. A Report's Settings.Server is "external"; rpcd bench
// says "child" of a server it started itself.
func Bench(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Replay != nil {
		rc := *cfg.Replay
		rc.Addr, rc.Client, rc.Duration, rc.Timeout = cfg.Addr, cfg.Client, cfg.Duration, cfg.Timeout
		rc.ServerCPU, rc.Progress = cfg.ServerCPU, cfg.Progress
		return Replay(ctx, rc)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	var res loadgen.Result
	var first map[string]string
	var srvCPU time.Duration
	srvOK := false
	measured := func(run func() error) error { // run with the server's CPU read around it
		var c0 time.Duration
		var err0 error
		if cfg.ServerCPU != nil {
			c0, err0 = cfg.ServerCPU()
		}
		if err := run(); err != nil {
			return err
		}
		if cfg.ServerCPU != nil && err0 == nil {
			if c1, err1 := cfg.ServerCPU(); err1 == nil && c1 >= c0 {
				srvCPU, srvOK = c1-c0, true
			}
		}
		return nil
	}
	if cfg.Rate == 0 {
		// A closed loop's callers wait for a connection: a lost
		// connection costs the calls it had in flight, not one failure
		// per attempt while it redials.
		cfg.Client.WaitForReady = true
	}
	if asyncCan(cfg.Addr, cfg.Scenario) {
		var d *asyncDriver
		if d, err = dialAsync(ctx, driverConfig{addr: cfg.Addr, opts: cfg.Client, sc: cfg.Scenario,
			conns: cfg.Conns, inflight: cfg.Inflight, rate: cfg.Rate, timeout: cfg.Timeout}); err == nil {
			res, first, err = runPhased(ctx, cfg, d, measured)
		}
	} else {
		err = runClients(ctx, cfg, measured, &res, &first)
	}
	if err != nil {
		return nil, err
	}
	sc := cfg.Scenario
	callers := cfg.Conns * cfg.Inflight

	r := resultReport(res, first)
	r.Settings = Settings{
		Scenario:     sc.Name,
		Route:        sc.Route,
		Codec:        sc.Codec,
		Compress:     compressionName(cfg.Client),
		PayloadBytes: sc.Size,
		Addr:         cfg.Addr,
		Server:       "external",
		Connections:  cfg.Conns,
		Inflight:     cfg.Inflight,
		Callers:      callers,
		Warmup:       cfg.Warmup.String(),
		Rate:         cfg.Rate,
		Timeout:      cfg.Timeout.String(),
		GOMAXPROCS:   runtime.GOMAXPROCS(0),
	}
	if cfg.Rate > 0 {
		reached := res.CallsPerSec >= rateReachedShare*cfg.Rate
		r.RateReached = &reached
		if !reached {
			r.RateShortfall = rateShortfall(cfg.Rate, cfg.Conns, cfg.Inflight, res)
		}
	}
	if sc.custom {
		r.Settings.Scenario = "custom"
	}
	if r.ErrorsBy == nil {
		r.ErrorsBy = map[string]int64{}
	}
	if cfg.Calls > 0 {
		r.Settings.N = cfg.Calls
	} else {
		r.Settings.Duration = cfg.Duration.String()
	}
	if srvOK && res.Calls > 0 {
		r.ServerCPUPerCallUS = round(float64(srvCPU.Nanoseconds())/1e3/float64(res.Calls), 3)
	}
	for kind := range r.FirstErrors {
		if _, counted := r.ErrorsBy[kind]; !counted {
			delete(r.FirstErrors, kind) // seen in the warm-up only
		}
	}
	if len(r.FirstErrors) == 0 {
		r.FirstErrors = nil
	}
	return r, nil
}

// asyncCan reports whether a load of sc on addr runs on asynchronous
// calls (asyncDriver): sc has frames, and addr is one server. Else it runs
// on a goroutine per caller (runClients).
func asyncCan(addr string, sc Scenario) bool { return sc.frames != nil && !client.IsService(addr) }

// runClients runs cfg's load on clients, a goroutine per caller, through
// loadgen.Run, the measured part in measured.
func runClients(ctx context.Context, cfg Config, measured func(func() error) error, res *loadgen.Result, first *map[string]string) error {
	clients, closeClients, err := dialCallers(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeClients()

	sc := cfg.Scenario
	callers := cfg.Conns * cfg.Inflight
	workers := make([]*worker, callers)
	for w := range workers {
		workers[w] = &worker{call: sc.NewCall(clients[w/cfg.Inflight], w)}
	}
	call := func(ctx context.Context, w int) (int, error) {
		return workers[w].do(ctx, cfg.Timeout)
	}
	lcfg := loadgen.Config{
		Callers:  callers,
		Duration: cfg.Duration,
		Calls:    cfg.Calls,
		Warmup:   cfg.Warmup,
		Rate:     cfg.Rate,
		Classify: classify,
	}
	if cfg.Progress != nil {
		cfg.Progress(Progress{Starting: true})
		lcfg.Progress = func(p loadgen.Progress) {
			cfg.Progress(Progress{Elapsed: p.Elapsed, Calls: p.Calls, Errors: p.Errors})
		}
	}
	if cfg.Warmup > 0 { // a run of its own, so that measured holds the measured part alone
		warm := lcfg
		warm.Calls, warm.Duration, warm.Warmup, warm.Progress = 0, cfg.Warmup, 0, nil
		if _, err := loadgen.Run(ctx, warm, call); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		lcfg.Warmup = 0
	}
	if err := measured(func() error {
		var err error
		*res, err = loadgen.Run(ctx, lcfg, call)
		return err
	}); err != nil {
		return err
	}
	*first = map[string]string{}
	for _, wk := range workers {
		for kind, msg := range wk.firstErrors {
			if _, ok := (*first)[kind]; !ok {
				(*first)[kind] = msg
			}
		}
	}
	return nil
}

// compressionName is the compression opts ask for, for a report: empty
// for none.
func compressionName(opts client.Options) string {
	if opts.Compression == proto.CompressionNone {
		return ""
	}
	return opts.Compression.String()
}

// rateReachedShare is the share of Config.Rate a run must make for its
// report to say the rate was reached.
const rateReachedShare = 0.95

// rateShortfall says how far an open-loop run fell short of its rate and
// what held it back: callers that were busy all the time were too few for
// the calls' latency (Little's law: callers / latency is the most they
// make); callers often idle mean this process could not keep its own
// schedule.
func rateShortfall(rate float64, conns, inflight int, res loadgen.Result) string {
	msg := fmt.Sprintf("-rate %g not reached: %.0f calls/s, %.0f%% of it.", rate, res.CallsPerSec, 100*res.CallsPerSec/rate)
	callers := conns * inflight
	secs := res.Elapsed.Seconds()
	if res.Calls == 0 || secs <= 0 {
		return msg + " No call completed."
	}
	perCall := res.BusySec / float64(res.Calls) // seconds in a call, from its actual start
	if busy := res.BusySec / (float64(callers) * secs); busy < 0.9 {
		return msg + fmt.Sprintf(" The callers were idle %.0f%% of the time yet fell behind their schedule: this process could not keep up (%.1f µs of its CPU a call, GOMAXPROCS %d).",
			100*(1-busy), res.CPUPerCallUS, runtime.GOMAXPROCS(0))
	}
	who := fmt.Sprintf("%d callers (-c %d × -inflight %d), each call taking %s, make", callers, conns, inflight, usText(perCall))
	if callers == 1 {
		who = fmt.Sprintf("1 caller (-c 1 × -inflight 1), each call taking %s, makes", usText(perCall))
	}
	need := int(math.Ceil(rate * perCall))
	return msg + fmt.Sprintf(" %s at most about %.0f calls/s: -rate %g needs -c × -inflight of at least %d, if the server keeps up."+
		" Latency counts from each call's scheduled start, so it holds the wait behind the schedule.",
		who, float64(callers)/perCall, rate, need)
}

// usText writes seconds as microseconds, or milliseconds past 10 ms.
func usText(secs float64) string {
	if secs >= 0.01 {
		return fmt.Sprintf("%.1f ms", secs*1e3)
	}
	return fmt.Sprintf("%.0f µs", secs*1e6)
}

// Runs makes each of cells runs times, the whole set once per run, so
// that a noisy moment hits every cell alike, with run making one; it
// returns the Median of each cell's runs, for the cells that made one,
// and the first error, which stops it. It stops between runs once ctx
// ends.
func Runs(ctx context.Context, cells []Config, runs int, run func(Config) (*Report, error)) ([]*Report, error) {
	made := make([][]*Report, len(cells))
	var err error
sweeps:
	for r := 0; r < runs; r++ {
		for i, cell := range cells {
			var rep *Report
			if rep, err = run(cell); err != nil {
				break sweeps
			}
			made[i] = append(made[i], rep)
			if ctx.Err() != nil {
				break sweeps
			}
		}
	}
	var medians []*Report
	for _, rs := range made {
		if len(rs) > 0 {
			medians = append(medians, Median(rs))
		}
	}
	return medians, err
}

// Median returns the run of runs with the median calls/s (the lower middle
// one of an even number), its Runs set to their number and, of more than
// one, its errors those of all the runs; nil for no runs. Runs of the same
// load interleaved with others, so that a noisy moment hits every load
// evenly, are what rpcd bench -runs reports this way.
func Median(runs []*Report) *Report {
	if len(runs) == 0 {
		return nil
	}
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(a, b *Report) int { return cmp.Compare(a.CallsPerSec, b.CallsPerSec) })
	m := *sorted[(len(sorted)-1)/2]
	m.Runs = len(runs)
	if len(runs) > 1 {
		m.Errors, m.ErrorsBy, m.FirstErrors = 0, map[string]int64{}, map[string]string{}
		for _, r := range runs {
			m.Errors += r.Errors
			for k, v := range r.ErrorsBy {
				m.ErrorsBy[k] += v
			}
			for k, v := range r.FirstErrors {
				if _, ok := m.FirstErrors[k]; !ok {
					m.FirstErrors[k] = v
				}
			}
		}
	}
	return &m
}

// AllFailed returns an error if no call was made in reports, or if every
// one failed: the error counts them by kind, with the first message of
// each kind. Otherwise, failed calls and all, it returns nil.
func AllFailed(reports []*Report) error {
	var calls, failed int64
	by := map[string]int64{}
	first := map[string]string{}
	for _, r := range reports {
		calls += r.Calls
		failed += r.Errors
		for k, v := range r.ErrorsBy {
			by[k] += v
		}
		for k, v := range r.FirstErrors {
			if _, ok := first[k]; !ok {
				first[k] = v
			}
		}
	}
	switch {
	case calls == 0:
		return errors.New("rpcd: no call completed")
	case failed < calls:
		return nil
	}
	msg := fmt.Sprintf("rpcd: every call failed, %d of %d (%s)", failed, calls, errorKinds(by))
	for _, k := range sortedKeys(by) {
		if m, ok := first[k]; ok {
			msg += "\n  first " + k + ": " + m
		}
	}
	return errors.New(msg)
}

// dialCallers opens cfg.Conns callers on cfg.Addr: clients of one
// connection each for a server, or, for a service, Clusters each with one
// connection to every node. It returns the function that closes them.
func dialCallers(ctx context.Context, cfg Config) ([]Caller, func(), error) {
	n := cfg.Conns
	callers := make([]Caller, 0, n)
	if !client.IsService(cfg.Addr) {
		clients, err := dialClients(ctx, cfg.Addr, n, cfg.Client)
		if err != nil {
			return nil, nil, err
		}
		for _, cl := range clients {
			callers = append(callers, cl)
		}
		return callers, func() {
			for _, cl := range clients {
				cl.Close()
			}
		}, nil
	}
	base := cfg.Client
	base.Conns = 1
	clusters := make([]*client.Cluster, 0, n)
	closeAll := func() {
		for _, k := range clusters {
			k.Close()
		}
	}
	for i := range n {
		opts := client.ServiceOptions{Options: base}
		if cfg.Cluster != nil {
			cfg.Cluster(&opts, i)
		}
		dctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		k, err := client.DialService(dctx, cfg.Addr, opts)
		cancel()
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		clusters = append(clusters, k)
		callers = append(callers, k)
	}
	return callers, closeAll, nil
}

// dialClients opens n clients of one connection each to addr: all of them,
// or none and the first error.
func dialClients(ctx context.Context, addr string, n int, opts client.Options) ([]*client.Client, error) {
	opts.Conns = 1
	clients := make([]*client.Client, 0, n)
	for range n {
		cl, err := client.Dial(ctx, addr, opts)
		if err != nil {
			for _, cl := range clients {
				cl.Close()
			}
			return nil, err
		}
		clients = append(clients, cl)
	}
	return clients, nil
}

// worker is one caller's state: its call, with its own buffers, and the
// first message of each kind of error it met.
type worker struct {
	call        Call
	firstErrors map[string]string
}

// do makes one call under run, the context of the run's phase, with a
// deadline of timeout, and returns the payload bytes moved.
func (w *worker) do(run context.Context, timeout time.Duration) (int, error) {
	ctx := run
	// The run's own end bounds the call when it comes first: no context to
	// make then, and no allocation.
	if dl, ok := run.Deadline(); !ok || time.Until(dl) > timeout {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(run, timeout)
		defer cancel()
	}
	n, err := w.call(ctx)
	if err != nil && run.Err() == nil {
		if dl, ok := run.Deadline(); !ok || time.Now().Before(dl) {
			w.note(err) // a failure, not the end of the run
		}
	}
	return n, err
}

// note keeps err's message if it is the first of its kind for this worker.
func (w *worker) note(err error) {
	kind := classify(err)
	if _, ok := w.firstErrors[kind]; ok {
		return
	}
	if w.firstErrors == nil {
		w.firstErrors = map[string]string{}
	}
	w.firstErrors[kind] = err.Error()
}

// classify names the kind of a failed call: "wrong reply", or its rpcd
// code ("unavailable", "deadline exceeded", ...).
func classify(err error) string {
	if errors.Is(err, ErrWrongReply) {
		return "wrong reply"
	}
	return handler.CodeOf(err).String()
}

// ServerCPUFromStats returns a Config.ServerCPU that reads the server's
// CPU time from its builtin.Stats (Sys/Stats, which rpcd serve serves)
// through c, each call within timeout. A server that does not serve it, or
// reports no CPU time, gives an error, and the report no server CPU.
func ServerCPUFromStats(c Caller, timeout time.Duration) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		var st builtin.StatsReply
		if err := c.Call(ctx, builtin.Stats, nil, &st); err != nil {
			return 0, err
		}
		if st.CPUSec <= 0 {
			return 0, errors.New("rpcd: the server reports no CPU time")
		}
		return time.Duration(st.CPUSec * float64(time.Second)), nil
	}
}
