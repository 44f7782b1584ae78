package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rpcd/rpcd/client"
	rpcdaemon "github.com/rpcd/rpcd/daemon"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/load"
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
` + benchScenarioList() + `
-route loads a route of your own instead, sending the bytes of -payload FILE
or -size N bytes, raw (or JSON with -json-codec: FILE must hold JSON, and
-size N makes a JSON string of N bytes, quotes included). Its replies are
not checked unless -expect-echo asks that each equal the payload. A reply
that is not the one expected counts as a "wrong reply" error; other errors
count by their rpcd code ("unavailable", "deadline exceeded", ...). JSON
scenarios call through client.Call, encoding and decoding each call as a
typed caller does; raw ones use CallRaw with a reply buffer per caller.

Load: -c TCP connections, each with -inflight callers that call without
pause (closed loop) during -d after -warmup, or until -n calls in total;
a caller whose connection is lost waits for it to come back, up to its
-timeout.
The calls go through a client.Client per connection, as a program calls:
a named scenario on one server through a client.Pipe per connection (its
callers' calls asynchronous, each answered call's successor sent with the
others its batch of replies starts, in one write), a service -addr or a
program's own scenario a goroutine per caller.
-rate makes the load open loop: that many calls/s in total, each call's
latency counted from its scheduled start, so a stalled server shows. A run
that makes less than 95% of -rate says so on standard error, and in the
JSON (rate_reached, rate_shortfall), with what held it back: callers too
few for the calls' latency (-c × -inflight / latency is the most they
make), or this process falling behind its schedule.

-matrix seed runs the seed table against one server (the scenarios rpcd's
benchmarks began from; docs/performance.md says where): its six scenarios
at 1, 4, 16, 20 and 32 callers with a connection each, and the
throughput rows, NoArg and EchoPacket16 over 100 connections; each cell
runs -d (2s by default here) after -warmup (500ms by default here).

-replay FILE makes a recording's calls again, open loop: a connection per
recorded connection, each call when due (its recorded time / -speed),
-loop times or until -d, latency counted from when it was due; -compare
checks each answer against the recorded one (docs/recording.md).

-runs N makes every cell N times, the whole set of cells once per run so
that a noisy moment hits cells evenly, and reports for each cell the run
with the median calls/s (its other figures from that same run).

Output is a table, or with -json one JSON object (an array of them with
-matrix). Latency is in µs from send to reply. MB/s counts request and
reply payloads. CPU µs/call is this process's user+system CPU time per
call: the load generator's share; server CPU µs/call is the server's over
the same window, from its ` + builtin.Stats + ` where it serves it (rpcd serve
does), "-" where not. On a
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
rpcd bench -matrix seed -d 2s -runs 3
rpcd bench -addr 10.0.0.7:7070 -replay orders.rec -speed 2 -compare -compare-ignore served_at`,
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
	replay     string          // -replay: the recording replayed
	rc         load.ReplayConfig
	ignore     string // -compare-ignore

	set map[string]bool // the flags given on the command line
}

// setupBench defines bench's flags; see command.setup.
func setupBench(fs *flag.FlagSet) func(*cli, []string) error {
	f := &benchFlags{}
	fs.StringVar(&f.addr, "addr", "", "server `address` to load: host:port, unix:///path, or a service: etcd://ENDPOINTS/NAME, dns://[SERVER]/HOST:PORT or static://HOST:PORT,HOST:PORT/NAME (-c clients, each spreading calls over every node; docs/scale-out.md); empty starts a child \"rpcd serve\" on 127.0.0.1:0")
	fs.StringVar(&f.scenario, "scenario", "NoArg", benchScenarioUsage())
	fs.StringVar(&f.route, "route", "", "load this `route` instead of a scenario, with -payload or -size")
	fs.StringVar(&f.payload, "payload", "", "with -route, send the bytes of this `file`")
	fs.IntVar(&f.size, "size", 0, "with -route, send `N` bytes; with -scenario FanOut, the message size (default 16)")
	fs.IntVar(&f.subs, "subs", 100, "with -scenario FanOut, the number of subscribers, each on a connection of its own")
	fs.BoolVar(&f.jsonCodec, "json-codec", false, "with -route, send the payload as JSON (codec json) rather than raw")
	fs.BoolVar(&f.expectEcho, "expect-echo", false, "with -route, count a reply that differs from the payload as a wrong reply")
	fs.IntVar(&f.conns, "c", 1, "`N` TCP connections")
	fs.IntVar(&f.inflight, "inflight", 1, "`N` concurrent callers per connection; callers in total: -c × -inflight")
	fs.DurationVar(&f.duration, "d", benchDuration, "how long to measure; per cell with -matrix, where the default is 2s")
	fs.Int64Var(&f.calls, "n", 0, "measure `N` calls in total instead of running for -d; per cell with -matrix")
	fs.DurationVar(&f.warmup, "warmup", benchWarmup, "how long to call before measuring, calls not counted; 500ms by default with -matrix")
	fs.Float64Var(&f.rate, "rate", 0, "open loop at `R` calls/s in total (a warning if under 95% of it is made); 0 is closed loop, calling as fast as replies come")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Second, "deadline of each call, and bound on connecting")
	fs.IntVar(&f.maxFrame, "max-frame", proto.DefaultMaxFrameSize, "largest frame sent or read, header included, in `bytes`; given to the child server too")
	fs.BoolVar(&f.jsonOut, "json", false, "write the results as JSON on standard output")
	fs.StringVar(&f.matrix, "matrix", "", "`name` of a set of runs to make in one go: seed (the seed table)")
	fs.IntVar(&f.runs, "runs", 1, "make every cell `N` times, interleaved, and report each cell's median run by calls/s")
	fs.StringVar(&f.replay, "replay", "", "make the calls of this recording `file` again, at their recorded times, instead of a scenario")
	fs.Float64Var(&f.rc.Speed, "speed", 1, "with -replay, play `N` times as fast as recorded")
	fs.IntVar(&f.rc.Loops, "loop", 1, "with -replay, play the recording `N` times; 0: until -d")
	fs.BoolVar(&f.rc.Compare, "compare", false, "with -replay, check each answer against the recorded one; the mismatches are reported by route")
	fs.StringVar(&f.ignore, "compare-ignore", "", "with -compare, JSON `fields` ignored, comma-separated: a name at any depth (at), or a path from the top (user.at)")
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

// otherLoads are the loads bench's -scenario names that are not calls,
// each with what it is and the function that runs it: with the call
// scenarios (load.Scenarios), every name -scenario takes. bench dispatches
// on this table, and its error and -h list it, so the three cannot
// disagree.
var otherLoads = []struct {
	name, what string
	run        func(*cli, *benchFlags) error
}{
	{load.FanOutName, "publish/subscribe: one publisher, -subs subscribers", (*cli).benchFanOut},
	{load.StreamUploadName, "stream goodput to the server: -c streams of -size bytes (default 256 MiB)", (*cli).benchStream},
	{load.StreamDownloadName, "stream goodput from the server, as StreamUpload", (*cli).benchStream},
}

// otherLoad returns the entry of otherLoads called name, in any case, or
// nil.
func otherLoad(name string) func(*cli, *benchFlags) error {
	for _, l := range otherLoads {
		if strings.EqualFold(l.name, name) {
			return l.run
		}
	}
	return nil
}

// benchScenarioNames returns every name bench's -scenario takes: the call
// scenarios, then the other loads.
func benchScenarioNames() []string {
	names := load.ScenarioNames()
	for _, l := range otherLoads {
		names = append(names, l.name)
	}
	return names
}

// benchScenarioList lists the scenarios, a line each, for bench -h.
func benchScenarioList() string {
	var b strings.Builder
	for _, sc := range load.Scenarios() {
		fmt.Fprintf(&b, "  %-15s %s\n", sc.Name, sc.What)
	}
	for _, l := range otherLoads {
		fmt.Fprintf(&b, "  %-15s %s\n", l.name, l.what)
	}
	return b.String()
}

// benchScenarioUsage is the usage of bench's -scenario.
func benchScenarioUsage() string {
	var b strings.Builder
	b.WriteString("`name` of the load: ")
	b.WriteString(strings.Join(load.ScenarioNames(), ", "))
	for _, l := range otherLoads {
		b.WriteString(", " + l.name + " (" + l.what + ")")
	}
	return b.String()
}

// benchPlan is what the flags ask for.
type benchPlan struct {
	// cells are the loads, each but for its server and clients (set by
	// runCell).
	cells  []load.Config
	matrix bool // cells are those of load.SeedMatrix
	runs   int  // each cell this many times; the median run is reported
}

// plan checks the flags and returns the runs they ask for, with a
// usageError for any that cannot work. A payload file is read later.
func (f *benchFlags) plan() (*benchPlan, error) {
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
	p := &benchPlan{runs: f.runs}
	base := load.Config{Duration: f.duration, Calls: f.calls, Warmup: f.warmup, Rate: f.rate, Timeout: f.timeout}
	notWith := map[bool][]string{false: {"speed", "loop", "compare", "compare-ignore"}, true: {"scenario", "route", "payload", "size", "json-codec", "expect-echo", "matrix", "c", "inflight", "n", "warmup", "rate", "runs"}}
	for _, name := range notWith[f.replay != ""] {
		if f.set[name] {
			return nil, usagef("-%s does not go with%s -replay", name, map[bool]string{false: "out"}[f.replay != ""])
		}
	}
	if f.replay != "" {
		rc := f.rc
		rc.CompareIgnore = strings.Split(f.ignore, ",")
		if rc.Speed <= 0 || rc.Loops < 0 || rc.Loops == 0 && !f.set["d"] {
			return nil, usagef("-speed %g, -loop %d: want a speed above 0, and -loop 0 (until -d) with -d", rc.Speed, rc.Loops)
		}
		var err error
		if rc.Recording, err = load.OpenRecording(f.replay); err != nil {
			return nil, err
		}
		base.Replay, base.Scenario.Name, base.Warmup = &rc, load.ReplayName, 0
		if !f.set["d"] {
			base.Duration = 0 // until the loops end
		}
		p.cells = []load.Config{base}
		return p, nil
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
			base.Duration = benchMatrixDuration
		}
		if !f.set["warmup"] {
			base.Warmup = benchMatrixWarmup
		}
		cells, err := load.SeedMatrix().Configs(base)
		if err != nil {
			return nil, err
		}
		p.cells = cells
		return p, nil
	}

	base.Conns, base.Inflight = f.conns, f.inflight
	if f.route == "" {
		for _, name := range []string{"payload", "size", "json-codec", "expect-echo"} {
			if f.set[name] {
				return nil, usagef("-%s goes with -route", name)
			}
		}
		sc, ok := load.LookupScenario(f.scenario)
		if !ok {
			return nil, usagef("-scenario is %q, want one of %s", f.scenario, strings.Join(benchScenarioNames(), ", "))
		}
		base.Scenario = sc
		p.cells = []load.Config{base}
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
	p.cells = []load.Config{base} // Scenario set once the payload is read
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
func (f *benchFlags) customScenario() (load.Scenario, error) {
	var payload []byte
	switch {
	case f.set["payload"]:
		b, err := readPayload(f.payload, f.maxFrame)
		if err != nil {
			return load.Scenario{}, err
		}
		if err := f.checkFrame(len(b)); err != nil {
			return load.Scenario{}, err
		}
		if f.jsonCodec && !json.Valid(b) {
			return load.Scenario{}, usagef("-payload %s is not valid JSON; drop -json-codec to send it raw", f.payload)
		}
		payload = b
	case f.jsonCodec && f.size > 0:
		payload = load.JSONString(f.size - 2)
	default:
		payload = load.Pattern(f.size)
	}
	if f.jsonCodec {
		return load.JSONRoute(f.route, payload, f.expectEcho), nil
	}
	return load.RawRoute(f.route, payload, f.expectEcho), nil
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
	child *rpcdaemon.Process // nil for a server at -addr
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
	return &benchTarget{addr: child.Addr(), child: child}, func() {
		if serr := child.Stop(); serr != nil {
			fmt.Fprintln(c.stderr, serr)
		}
	}, nil
}

// startServeChild starts this program as `rpcd serve -log-format text
// args...` and waits until it logs the address it listens on.
func startServeChild(ctx context.Context, args ...string) (*rpcdaemon.Process, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("rpcd: finding this program to start a server: %w", err)
	}
	return rpcdaemon.StartServe(ctx, exe, args...)
}

func (t *benchTarget) String() string {
	if t.child != nil {
		return fmt.Sprintf("child process pid %d at %s", t.child.Pid(), t.addr)
	}
	return t.addr
}

func (c *cli) bench(f *benchFlags, args []string) error {
	if run := otherLoad(f.scenario); run != nil && !f.set["route"] && f.matrix == "" && f.replay == "" {
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
		p.cells[0].Scenario = sc
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

	var progress *load.ProgressLine
	if isTerminal(c.stderr) {
		progress = load.NewProgressLine(c.stderr)
	}
	// The clients' options, with the flags' files read, where the first
	// cell dials: a mistake in them shows once the server is named.
	opts, runErr := c.clientOptions(f.timeout, f.maxFrame, &f.sec, &f.compress)
	if runErr == nil && client.IsService(target.addr) {
		runErr = f.etcd.cfg.RegisterEtcdScheme()
	}
	var reports []*load.Report
	if runErr == nil {
		reports, runErr = load.Runs(ctx, p.cells, p.runs, func(cell load.Config) (*load.Report, error) {
			return c.runCell(ctx, f, cell, target, opts, progress)
		})
	}
	if ctx.Err() != nil {
		runErr = errBenchInterrupted
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
		_ = load.SeedMatrix().WriteText(&out, reports, p.runs)
	default:
		_ = reports[0].WriteText(&out, p.runs)
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
	return load.AllFailed(reports)
}

// errBenchInterrupted ends a bench cut short by SIGINT or SIGTERM.
var errBenchInterrupted = errors.New("rpcd: bench interrupted; the results cover the calls made until then")

// runCell runs one cell's load on the target with clients of opts, the
// progress line drawn if there is one, and notes in the report the
// -compress asked for and a child server.
func (c *cli) runCell(ctx context.Context, f *benchFlags, cfg load.Config, target *benchTarget, opts client.Options, progress *load.ProgressLine) (*load.Report, error) {
	cfg.Addr, cfg.Client, cfg.Cluster = target.addr, opts, f.balance.apply
	if progress != nil {
		cfg.Progress = progress.Func(fmt.Sprintf("%s %d×%d", cfg.Scenario.Name, cfg.Conns, cfg.Inflight), cfg.Warmup)
		defer progress.End()
	}
	if !client.IsService(target.addr) {
		// The server's CPU per call, from its Sys/Stats, where it serves it.
		sctx, cancel := context.WithTimeout(ctx, f.timeout)
		stats, err := client.Dial(sctx, target.addr, opts)
		cancel()
		if err == nil {
			defer stats.Close()
			cfg.ServerCPU = load.ServerCPUFromStats(stats, f.timeout)
		}
	}
	r, err := load.Bench(ctx, cfg)
	if err != nil {
		return nil, err
	}
	r.Settings.Compress = f.compress.name // as given: "none" too
	if target.child != nil {
		r.Settings.Server = "child"
		r.Settings.ChildPID = target.child.Pid()
	}
	return r, nil
}
