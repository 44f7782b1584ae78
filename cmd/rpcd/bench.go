package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/loadgen"
	"github.com/rpcd/rpcd/proto"
)

var benchCmd = &command{
	name:     "bench",
	synopsis: "[flags]",
	summary:  "load a server and report calls/s and latency",
	about: `Bench loads a server with calls and reports calls/s, errors by kind and
latency percentiles. Without -addr it starts "rpcd serve -addr 127.0.0.1:0"
as a child process (this same program), loads it and stops it at the end;
with -addr it loads the server there. The first line of output names the
server loaded.

Scenarios (-scenario), those of the NewLife.Remoting report, and Sum:
  NoArg           Bench/NoArg, JSON, no argument; the reply must be 42
  EchoString16    Bench/EchoString, a JSON string of 16 chars, echoed
  EchoString2000  Bench/EchoString, a JSON string of 2000 chars, echoed
  MultiArgs       Bench/MultiArgs, JSON int32, int64, bool, float64 and
                  string; the reply must be builtin.MultiArgsResult of them
  EchoPacket16    Bench/EchoPacket, 16 raw bytes, echoed byte for byte
  EchoPacket2000  Bench/EchoPacket, 2000 raw bytes, echoed byte for byte
  Sum             Math/Sum, JSON, a and b new on every call; reply a+b
  FanOut          publish/subscribe: one publisher, -subs subscribers on a
                  connection each; messages/s delivered
  StreamUpload    -c streams, each of -size bytes (default 256 MiB) to
                  Bench/StreamSink; goodput and the server's memory
  StreamDownload  the same from Bench/StreamSource
-route loads a route of your own instead, sending the bytes of -payload FILE
or -size N bytes, raw (or JSON with -json-codec: FILE must hold JSON, and
-size N makes a JSON string of N bytes, quotes included). Its replies are
not checked unless -expect-echo asks that each equal the payload. A reply
that is not the one expected counts as a "wrong reply" error; other errors
count by their rpcd code ("unavailable", "deadline exceeded", ...). JSON
scenarios call through client.Call, encoding and decoding each call as a
typed caller does; raw ones use CallRaw with a reply buffer per caller.

Load: -c TCP connections, each with -inflight callers that call without
pause (closed loop) during -d after -warmup, or until -n calls in total.
-rate makes the load open loop: that many calls/s in total, each call's
latency counted from its scheduled start, so a stalled server shows. A run
that makes less than 95% of -rate says so on standard error, and in the
JSON (rate_reached, rate_shortfall), with what held it back: callers too
few for the calls' latency (-c × -inflight / latency is the most they
make), or this process falling behind its schedule.

-matrix seed runs the NewLife table against one server: the six NewLife
scenarios at 1, 4, 16, 20 and 32 callers with a connection each, and the
throughput rows, NoArg and EchoPacket16 over 100 connections; each cell
runs -d (2s by default here) after -warmup (500ms by default here).

-runs N makes every cell N times, the whole set of cells once per run so
that a noisy moment hits cells evenly, and reports for each cell the run
with the median calls/s (its other figures from that same run).

Output is a table, or with -json one JSON object (an array of them with
-matrix). Latency is in µs from send to reply. MB/s counts request and
reply payloads. CPU µs/call is this process's user+system CPU time per
call: the load generator's share, the server running elsewhere. On a
terminal, a progress line on standard error shows calls, calls/s over the
last second and errors, once a second. Ctrl-C stops the run, prints what
was measured, stops the child server and exits 1.

Exit status: 0 when the run completes, even if calls failed (they are
reported); 1 if it cannot run (server unreachable, child not starting),
every call failed, or it was interrupted; 2 on a usage error.`,
	example: `rpcd bench -scenario EchoPacket16 -c 4 -inflight 32 -d 5s
rpcd bench -addr 10.0.0.7:7070 -scenario NoArg -c 16 -rate 50000 -json
rpcd bench -route Bench/EchoPacket -size 100 -expect-echo -n 100000
rpcd bench -route Orders/Put -payload order.json -json-codec -c 8
rpcd bench -matrix seed -d 2s -runs 3`,
	setup: setupBench,
}

// Defaults of the flags that -matrix seed changes.
const (
	benchDuration       = 5 * time.Second
	benchWarmup         = time.Second
	benchMatrixDuration = 2 * time.Second
	benchMatrixWarmup   = 500 * time.Millisecond
	benchMaxCallers     = 1 << 20 // more goroutines than that is a typo
)

// The NewLife table (-matrix seed).
var (
	seedScenarios        = []string{"NoArg", "EchoString16", "EchoString2000", "MultiArgs", "EchoPacket16", "EchoPacket2000"}
	seedCallers          = []int{1, 4, 16, 20, 32}
	seedThroughput       = []string{"NoArg", "EchoPacket16"}
	seedThroughputConns  = 100
	seedThroughputSuffix = " throughput"
)

// benchFlags are bench's flags.
type benchFlags struct {
	addr       string
	scenario   string
	route      string
	payload    string
	size       int
	jsonCodec  bool
	expectEcho bool
	conns      int
	inflight   int
	duration   time.Duration
	calls      int64
	warmup     time.Duration
	rate       float64
	timeout    time.Duration
	maxFrame   int
	jsonOut    bool
	matrix     string
	runs       int
	sec        clientSecurityFlags
	compress   compressFlag
	etcd       etcdAccessFlags // for an etcd:// -addr
	balance    balanceFlags    // for a service -addr
	subs       int             // FanOut's subscribers

	set map[string]bool // the flags given on the command line
}

// setupBench defines bench's flags; see command.setup.
func setupBench(fs *flag.FlagSet) func(*cli, []string) error {
	f := &benchFlags{}
	fs.StringVar(&f.addr, "addr", "", "server `address` to load: host:port, unix:///path, or a service, etcd://ENDPOINTS/NAME or dns://[SERVER]/HOST:PORT (-c clients, each spreading calls over every node; docs/scale-out.md); empty starts a child \"rpcd serve\" on 127.0.0.1:0")
	fs.StringVar(&f.scenario, "scenario", "NoArg", benchScenarioUsage())
	fs.StringVar(&f.route, "route", "", "load this `route` instead of a scenario, with -payload or -size")
	fs.StringVar(&f.payload, "payload", "", "with -route, send the bytes of this `file`")
	fs.IntVar(&f.size, "size", 0, "with -route, send `N` bytes; with -scenario FanOut, the message size (default 16)")
	fs.IntVar(&f.subs, "subs", 100, "with -scenario FanOut, the number of subscribers, each on a connection of its own")
	fs.BoolVar(&f.jsonCodec, "json-codec", false, "with -route, send the payload as JSON (codec json) rather than raw")
	fs.BoolVar(&f.expectEcho, "expect-echo", false, "with -route, count a reply that differs from the payload as a wrong reply")
	fs.IntVar(&f.conns, "c", 1, "`N` TCP connections, each its own client")
	fs.IntVar(&f.inflight, "inflight", 1, "`N` concurrent callers per connection; callers in total: -c × -inflight")
	fs.DurationVar(&f.duration, "d", benchDuration, "how long to measure; per cell with -matrix, where the default is 2s")
	fs.Int64Var(&f.calls, "n", 0, "measure `N` calls in total instead of running for -d; per cell with -matrix")
	fs.DurationVar(&f.warmup, "warmup", benchWarmup, "how long to call before measuring, calls not counted; 500ms by default with -matrix")
	fs.Float64Var(&f.rate, "rate", 0, "open loop at `R` calls/s in total (a warning if under 95% of it is made); 0 is closed loop, calling as fast as replies come")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Second, "deadline of each call, and bound on connecting")
	fs.IntVar(&f.maxFrame, "max-frame", proto.DefaultMaxFrameSize, "largest frame sent or read, header included, in `bytes`; given to the child server too")
	fs.BoolVar(&f.jsonOut, "json", false, "write the results as JSON on standard output")
	fs.StringVar(&f.matrix, "matrix", "", "`name` of a set of runs to make in one go: seed (the NewLife table)")
	fs.IntVar(&f.runs, "runs", 1, "make every cell `N` times, interleaved, and report each cell's median run by calls/s")
	f.sec.define(fs)
	f.compress.define(fs)
	f.etcd.define(fs, "with an etcd:// -addr")
	f.balance.define(fs, "with -balance hash: every call's `key`, \"{c}\" in it the number of its client (-c), so that user-{c} gives each client a node of its own")
	return func(c *cli, args []string) error {
		f.set = map[string]bool{}
		fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
		return c.bench(f, args)
	}
}

// benchCell is one run of a bench: a load on a number of connections.
type benchCell struct {
	sc       *scenario
	conns    int
	inflight int
}

// benchPlan is what the flags ask for.
type benchPlan struct {
	cells    []benchCell
	matrix   bool
	duration time.Duration // 0 when calls is set
	calls    int64
	warmup   time.Duration
	runs     int // each cell this many times; the median run is reported
}

// plan checks the flags and returns the runs they ask for, with a
// usageError for any that cannot work. A payload file is read later.
func (f *benchFlags) plan() (*benchPlan, error) {
	p := &benchPlan{duration: f.duration, calls: f.calls, warmup: f.warmup}
	switch {
	case f.conns < 1:
		return nil, usagef("-c is %d, want 1 or more", f.conns)
	case f.inflight < 1:
		return nil, usagef("-inflight is %d, want 1 or more", f.inflight)
	case f.conns*f.inflight > benchMaxCallers:
		return nil, usagef("-c %d × -inflight %d is more than %d callers", f.conns, f.inflight, benchMaxCallers)
	case f.calls < 0:
		return nil, usagef("-n is %d, want 0 (run for -d) or more", f.calls)
	case f.calls == 0 && f.duration <= 0:
		return nil, usagef("-d is %v, want more than 0", f.duration)
	case f.warmup < 0:
		return nil, usagef("-warmup is %v, want 0 or more", f.warmup)
	case f.rate < 0 || math.IsNaN(f.rate) || math.IsInf(f.rate, 0):
		return nil, usagef("-rate is %v, want 0 (closed loop) or more", f.rate)
	case f.timeout <= 0:
		return nil, usagef("-timeout is %v, want more than 0", f.timeout)
	case f.maxFrame < proto.HeaderSize:
		return nil, usagef("-max-frame is %d, want at least %d", f.maxFrame, proto.HeaderSize)
	case f.runs < 1:
		return nil, usagef("-runs is %d, want 1 or more", f.runs)
	case f.addr == "" && f.sec.given():
		return nil, usagef("the TLS and token flags go with -addr: the server bench starts itself serves plain TCP without authentication")
	}
	if err := f.etcd.checkTarget(f.addr); err != nil {
		return nil, err
	}
	if err := f.balance.check(f.addr); err != nil {
		return nil, err
	}
	p.runs = f.runs
	if f.calls > 0 {
		p.duration = 0
	}

	if f.matrix != "" {
		if f.matrix != "seed" {
			return nil, usagef("-matrix is %q, want seed", f.matrix)
		}
		for _, name := range []string{"scenario", "route", "payload", "size", "json-codec", "expect-echo", "c", "inflight", "rate"} {
			if f.set[name] {
				return nil, usagef("-matrix seed chooses the scenarios and callers itself; drop -%s", name)
			}
		}
		p.matrix = true
		if !f.set["d"] && f.calls == 0 {
			p.duration = benchMatrixDuration
		}
		if !f.set["warmup"] {
			p.warmup = benchMatrixWarmup
		}
		for _, name := range seedScenarios {
			sc := lookupScenario(name)
			for _, n := range seedCallers {
				p.cells = append(p.cells, benchCell{sc: sc, conns: n, inflight: 1})
			}
		}
		for _, name := range seedThroughput {
			p.cells = append(p.cells, benchCell{sc: lookupScenario(name), conns: seedThroughputConns, inflight: 1})
		}
		return p, nil
	}

	if f.route == "" {
		for _, name := range []string{"payload", "size", "json-codec", "expect-echo"} {
			if f.set[name] {
				return nil, usagef("-%s goes with -route", name)
			}
		}
		sc := lookupScenario(f.scenario)
		if sc == nil {
			return nil, usagef("-scenario is %q, want one of %s", f.scenario, strings.Join(benchScenarioNames(), ", "))
		}
		p.cells = []benchCell{{sc: sc, conns: f.conns, inflight: f.inflight}}
		return p, nil
	}
	switch {
	case f.set["scenario"]:
		return nil, usagef("-route and -scenario both name the load; give one")
	case f.set["payload"] && f.set["size"]:
		return nil, usagef("-payload and -size both give the payload; give one")
	case f.size < 0:
		return nil, usagef("-size is %d, want 0 or more", f.size)
	case f.jsonCodec && f.set["size"] && f.size < 2:
		return nil, usagef("-size is %d with -json-codec, want at least 2 (a JSON string, quotes included)", f.size)
	}
	if err := handler.ValidRoute(f.route); err != nil {
		return nil, usagef("-route: %v", strings.TrimPrefix(err.Error(), "rpcd: "))
	}
	if f.set["size"] {
		if err := f.checkFrame(f.size); err != nil {
			return nil, err
		}
	}
	p.cells = []benchCell{{conns: f.conns, inflight: f.inflight}} // sc set once the payload is read
	return p, nil
}

// checkFrame reports a request payload of n bytes that no frame can carry.
func (f *benchFlags) checkFrame(n int) error {
	if size := proto.HeaderSize + len(f.route) + n; size > f.maxFrame {
		return usagef("a request of %d bytes (header, route and a %d-byte payload) exceeds -max-frame %d", size, n, f.maxFrame)
	}
	return nil
}

// customScenario builds the load of -route, reading -payload if given.
func (f *benchFlags) customScenario() (*scenario, error) {
	var payload []byte
	switch {
	case f.set["payload"]:
		b, err := readPayload(f.payload, f.maxFrame)
		if err != nil {
			return nil, err
		}
		if err := f.checkFrame(len(b)); err != nil {
			return nil, err
		}
		if f.jsonCodec && !json.Valid(b) {
			return nil, usagef("-payload %s is not valid JSON; drop -json-codec to send it raw", f.payload)
		}
		payload = b
	case f.jsonCodec && f.size > 0:
		payload = jsonString(f.size - 2)
	default:
		payload = pattern(f.size)
	}
	if f.jsonCodec {
		return jsonRouteScenario(f.route, payload, f.expectEcho), nil
	}
	return rawRouteScenario(f.route, payload, f.expectEcho), nil
}

// readPayload reads the payload file, refusing one larger than any frame.
func readPayload(name string, maxFrame int) ([]byte, error) {
	fh, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("rpcd: reading -payload: %w", err)
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, int64(maxFrame)+1))
	if err != nil {
		return nil, fmt.Errorf("rpcd: reading -payload: %w", err)
	}
	if len(b) > maxFrame {
		return nil, usagef("-payload %s is larger than -max-frame %d", name, maxFrame)
	}
	return b, nil
}

// benchTarget is the server a bench loads.
type benchTarget struct {
	addr  string
	child *serveChild // nil for a server at -addr
}

// loadTarget returns the server a load command works on: the one at addr,
// or, with addr empty, a child "rpcd serve -addr 127.0.0.1:0 args..." that
// stop stops, writing to standard error what went wrong in stopping it.
func (c *cli) loadTarget(ctx context.Context, addr string, args ...string) (t *benchTarget, stop func(), err error) {
	if addr != "" {
		return &benchTarget{addr: addr}, func() {}, nil
	}
	child, err := startServeChild(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	if err != nil {
		return nil, nil, err
	}
	return &benchTarget{addr: child.addr, child: child}, func() {
		if serr := child.stop(); serr != nil {
			fmt.Fprintln(c.stderr, serr)
		}
	}, nil
}

func (t *benchTarget) String() string {
	if t.child != nil {
		return fmt.Sprintf("child process pid %d at %s", t.child.pid(), t.addr)
	}
	return t.addr
}

func (c *cli) bench(f *benchFlags, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q", args[0])
	}
	if run := otherLoad(f.scenario); run != nil && !f.set["route"] && f.matrix == "" {
		return run(c, f) // publish/subscribe (bench_fanout.go), streams (bench_stream.go)
	}
	p, err := f.plan()
	if err != nil {
		return err
	}
	if f.route != "" {
		sc, err := f.customScenario()
		if err != nil {
			return err
		}
		p.cells[0].sc = sc
	}

	ctx, stop := c.interruptible()
	defer stop()

	target, stopTarget, err := c.loadTarget(ctx, f.addr, "-max-frame", strconv.Itoa(f.maxFrame))
	if err != nil {
		if ctx.Err() != nil {
			return errBenchInterrupted
		}
		return err
	}
	defer stopTarget()
	if !f.jsonOut {
		if err := c.write([]byte("server: " + target.String() + "\n")); err != nil {
			return err
		}
	}

	var progress *progressLine
	if isTerminal(c.stderr) {
		progress = &progressLine{w: c.stderr}
	}
	runs := make([][]*benchReport, len(p.cells)) // each cell's runs
	var runErr error
sweeps:
	for range p.runs {
		for i, cell := range p.cells {
			r, err := c.runCell(ctx, f, p, target, cell, progress)
			if err != nil {
				runErr = err
				break sweeps
			}
			runs[i] = append(runs[i], r)
			if ctx.Err() != nil {
				break sweeps
			}
		}
	}
	if ctx.Err() != nil {
		runErr = errBenchInterrupted
	}
	var reports []*benchReport
	for _, rs := range runs {
		if len(rs) > 0 {
			reports = append(reports, medianRun(rs))
		}
	}
	if len(reports) == 0 && runErr != nil {
		if runErr == errBenchInterrupted {
			return errors.New("rpcd: bench interrupted before anything was measured")
		}
		return runErr
	}

	var out bytes.Buffer
	switch {
	case f.jsonOut && p.matrix:
		writeJSON(&out, reports)
	case f.jsonOut:
		writeJSON(&out, reports[0])
	case p.matrix:
		writeMatrix(&out, p, reports)
	default:
		writeTable(&out, p, reports[0])
	}
	if err := c.write(out.Bytes()); err != nil {
		return err
	}
	for _, r := range reports {
		if r.RateShortfall != "" {
			fmt.Fprintf(c.stderr, "rpcd bench: %s\n", r.RateShortfall)
		}
	}
	if runErr != nil {
		return runErr
	}
	return allFailed(reports)
}

// rateReachedShare is the share of -rate a run must make for bench not
// to warn that it fell short.
const rateReachedShare = 0.95

// rateShortfall says how far an open-loop run fell short of its rate and
// what held it back: callers that were busy all the time were too few for
// the calls' latency (Little's law: callers / latency is the most they
// make); callers often idle mean this process could not keep its own
// schedule.
func rateShortfall(rate float64, cell benchCell, res loadgen.Result) string {
	msg := fmt.Sprintf("-rate %g not reached: %.0f calls/s, %.0f%% of it.", rate, res.CallsPerSec, 100*res.CallsPerSec/rate)
	callers := cell.conns * cell.inflight
	secs := res.Elapsed.Seconds()
	if res.Calls == 0 || secs <= 0 {
		return msg + " No call completed."
	}
	perCall := res.BusySec / float64(res.Calls) // seconds in a call, from its actual start
	if busy := res.BusySec / (float64(callers) * secs); busy < 0.9 {
		return msg + fmt.Sprintf(" The callers were idle %.0f%% of the time yet fell behind their schedule: this process could not keep up (%.1f µs of its CPU a call, GOMAXPROCS %d).",
			100*(1-busy), res.CPUPerCallUS, runtime.GOMAXPROCS(0))
	}
	who := fmt.Sprintf("%d callers (-c %d × -inflight %d), each call taking %s, make", callers, cell.conns, cell.inflight, usText(perCall))
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

// medianRun returns the run with the median calls/s (the lower middle one
// of an even number), with the errors of all the runs.
func medianRun(rs []*benchReport) *benchReport {
	sorted := slices.Clone(rs)
	slices.SortFunc(sorted, func(a, b *benchReport) int { return cmp.Compare(a.CallsPerSec, b.CallsPerSec) })
	m := *sorted[(len(sorted)-1)/2]
	m.Runs = len(rs)
	if len(rs) > 1 {
		m.Errors, m.ErrorsBy, m.FirstErrors = 0, map[string]int64{}, map[string]string{}
		for _, r := range rs {
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

// errBenchInterrupted ends a bench cut short by SIGINT or SIGTERM.
var errBenchInterrupted = errors.New("rpcd: bench interrupted; the results cover the calls made until then")

// allFailed returns an error if calls were made and every one failed, or
// if none was made at all.
func allFailed(reports []*benchReport) error {
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

// runCell connects to the target and runs one cell's load.
func (c *cli) runCell(ctx context.Context, f *benchFlags, p *benchPlan, target *benchTarget, cell benchCell, progress *progressLine) (*benchReport, error) {
	clients, closeClients, err := c.dialCallers(ctx, target.addr, cell.conns, f) // bench_service.go
	if err != nil {
		return nil, err
	}
	defer closeClients()

	callers := cell.conns * cell.inflight
	workers := make([]*benchWorker, callers)
	for w := range workers {
		workers[w] = &benchWorker{call: cell.sc.newCall(clients[w/cell.inflight], w)}
	}
	call := func(ctx context.Context, w int) (int, error) {
		return workers[w].do(ctx, f.timeout)
	}

	cfg := loadgen.Config{
		Callers:  callers,
		Duration: p.duration,
		Calls:    p.calls,
		Warmup:   p.warmup,
		Rate:     f.rate,
		Classify: classifyBenchError,
	}
	label := fmt.Sprintf("%s %d×%d", cell.sc.name, cell.conns, cell.inflight)
	if progress != nil {
		progress.start(label, p.warmup)
		cfg.Progress = progress.update
	}
	res, err := loadgen.Run(ctx, cfg, call)
	if progress != nil {
		progress.end()
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, errBenchInterrupted
		}
		return nil, err
	}

	r := &benchReport{
		Calls:        res.Calls,
		Errors:       res.Errors,
		ErrorsBy:     res.ErrorsBy,
		ElapsedSec:   round(res.Elapsed.Seconds(), 3),
		CallsPerSec:  round(res.CallsPerSec, 1),
		BytesPerSec:  round(res.BytesPerSec, 0),
		MeanUS:       round(res.MeanUS, 3),
		P50US:        res.P50US,
		P90US:        res.P90US,
		P99US:        res.P99US,
		P999US:       res.P999US,
		MaxUS:        res.MaxUS,
		CPUPerCallUS: round(res.CPUPerCallUS, 3),
		Settings: benchSettings{
			Scenario:     cell.sc.name,
			Route:        cell.sc.route,
			Codec:        cell.sc.codec,
			Compress:     f.compress.name,
			PayloadBytes: cell.sc.size,
			Addr:         target.addr,
			Server:       "external",
			Connections:  cell.conns,
			Inflight:     cell.inflight,
			Callers:      callers,
			Warmup:       p.warmup.String(),
			Rate:         f.rate,
			Timeout:      f.timeout.String(),
			GOMAXPROCS:   runtime.GOMAXPROCS(0),
		},
	}
	if f.rate > 0 {
		reached := res.CallsPerSec >= rateReachedShare*f.rate
		r.RateReached = &reached
		if !reached {
			r.RateShortfall = rateShortfall(f.rate, cell, res)
		}
	}
	if cell.sc.custom {
		r.Settings.Scenario = "custom"
	}
	if r.ErrorsBy == nil {
		r.ErrorsBy = map[string]int64{}
	}
	if target.child != nil {
		r.Settings.Server = "child"
		r.Settings.ChildPID = target.child.pid()
	}
	if p.calls > 0 {
		r.Settings.N = p.calls
	} else {
		r.Settings.Duration = p.duration.String()
	}
	for _, wk := range workers {
		for kind, msg := range wk.firstErrors {
			if _, counted := r.ErrorsBy[kind]; !counted {
				continue // seen in the warm-up only
			}
			if r.FirstErrors == nil {
				r.FirstErrors = map[string]string{}
			}
			if _, ok := r.FirstErrors[kind]; !ok {
				r.FirstErrors[kind] = msg
			}
		}
	}
	return r, nil
}

// dialBench opens n clients of one connection each, each dial bounded by
// -timeout.
func (c *cli) dialBench(ctx context.Context, addr string, n int, f *benchFlags) ([]*client.Client, error) {
	opts := client.Options{
		Conns:        1,
		Limits:       proto.Limits{MaxFrameSize: f.maxFrame},
		DialTimeout:  f.timeout,
		ProbeTimeout: min(probeTimeout, f.timeout),
		Logger:       quietLogger(c.stderr),
	}
	if err := f.sec.apply(&opts); err != nil {
		return nil, err
	}
	if err := f.compress.apply(&opts); err != nil {
		return nil, err
	}
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

// benchWorker is one caller's state: its call, with its own buffers, and
// the first message of each kind of error it met.
type benchWorker struct {
	call        benchCall
	firstErrors map[string]string
}

// do makes one call under run, the context of the run's phase, with a
// deadline of timeout, and returns the payload bytes moved.
func (w *benchWorker) do(run context.Context, timeout time.Duration) (int, error) {
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
func (w *benchWorker) note(err error) {
	kind := classifyBenchError(err)
	if _, ok := w.firstErrors[kind]; ok {
		return
	}
	if w.firstErrors == nil {
		w.firstErrors = map[string]string{}
	}
	w.firstErrors[kind] = err.Error()
}

// classifyBenchError names the kind of a failed call: "wrong reply", or its
// rpcd code ("unavailable", "deadline exceeded", ...).
func classifyBenchError(err error) string {
	if errors.Is(err, loadgen.ErrWrongReply) {
		return "wrong reply"
	}
	return handler.CodeOf(err).String()
}
