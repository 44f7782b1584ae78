package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/loadgen"
	"github.com/rpcd/rpcd/proto"
)

var soakCmd = &command{
	name:     "soak",
	synopsis: "[flags]",
	summary:  "hold many connections at a steady rate; check errors, memory and goroutines stay flat",
	about: `Soak opens -c connections, each its own client, and calls -scenario on
every one -rate times a second (open loop: each call at its scheduled time,
its latency counted from then), for -d after -warmup. Every -every it
reports the window's calls/s, errors and latency, and samples the server
through ` + builtin.Stats + `: heap in use, resident memory, goroutines and
connections. Before the load it samples the server idle and then with all
connections open, and reports the server's memory per connection.

Without -addr it starts this program as "rpcd serve" in a child process,
with -max-conns raised to fit -c. A server at -addr must serve
` + builtin.Stats + ` (rpcd serve does) and allow -c connections.

Soak passes when no call failed, every window after the warm-up made at
least 98% of the calls asked for (short of that, the machine cannot drive
the load, and the windows' latencies hide a growing backlog), and the
server stayed flat after the warm-up: the peaks of heap in use, resident
memory and goroutines in the second half of the windows are at most 10%
(and 8 MiB, or 16 goroutines) above those of the first half. Otherwise it
says what failed and exits 1.`,
	example: `rpcd soak -c 1000 -rate 100 -d 5m
rpcd soak -c 10000 -rate 10 -d 2m -json
rpcd soak -c 100 -rate 50 -d 1m -scenario EchoString2000 -compress zstd`,
	setup: setupSoak,
}

// soakFlags are soak's flags.
type soakFlags struct {
	addr     string
	scenario string
	conns    int
	rate     float64
	duration time.Duration
	warmup   time.Duration
	every    time.Duration
	timeout  time.Duration
	jsonOut  bool
	sec      clientSecurityFlags
	compress compressFlag
}

func setupSoak(fs *flag.FlagSet) func(*cli, []string) error {
	f := &soakFlags{}
	fs.StringVar(&f.addr, "addr", "", "server `address`; empty starts a child \"rpcd serve\" on 127.0.0.1:0")
	fs.StringVar(&f.scenario, "scenario", "EchoPacket16", "`name` of the load, as in rpcd bench")
	fs.IntVar(&f.conns, "c", 1000, "`N` connections, each its own client with one caller")
	fs.Float64Var(&f.rate, "rate", 100, "calls per second on each connection")
	fs.DurationVar(&f.duration, "d", 5*time.Minute, "how long to measure after the warm-up")
	fs.DurationVar(&f.warmup, "warmup", 30*time.Second, "how long to call before judging flatness (its windows are reported too)")
	fs.DurationVar(&f.every, "every", 10*time.Second, "the length of a window: a report line and a sample of the server")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Second, "deadline of each call, and bound on connecting")
	fs.BoolVar(&f.jsonOut, "json", false, "write the report as JSON on standard output")
	f.sec.define(fs)
	f.compress.define(fs)
	return func(c *cli, args []string) error { return c.soak(f, args) }
}

// soakWindow is one window of a soak: the load's figures and a sample of
// the server at its end.
type soakWindow struct {
	EndSec      float64            `json:"end_sec"` // since the load began
	Warmup      bool               `json:"warmup"`
	Calls       int64              `json:"calls"`
	Errors      int64              `json:"errors"`
	ErrorsBy    map[string]int64   `json:"errors_by,omitempty"`
	CallsPerSec float64            `json:"calls_per_sec"`
	P50US       float64            `json:"p50_us"`
	P99US       float64            `json:"p99_us"`
	MaxUS       float64            `json:"max_us"`
	FirstErrors map[string]string  `json:"first_errors,omitempty"`
	Server      builtin.StatsReply `json:"server"`
	Client      soakProcess        `json:"client"`
}

// soakProcess is a sample of this process, the load generator.
type soakProcess struct {
	Goroutines int    `json:"goroutines"`
	HeapInuse  uint64 `json:"heap_inuse"`
}

// soakReport is a whole soak.
type soakReport struct {
	Scenario    string             `json:"scenario"`
	Conns       int                `json:"conns"`
	RatePerConn float64            `json:"rate_per_conn"`
	Compression string             `json:"compression,omitempty"` // -compress: what the clients ask for
	Server      string             `json:"server"`
	Idle        builtin.StatsReply `json:"server_idle"`      // before the load's connections
	Connected   builtin.StatsReply `json:"server_connected"` // with them, before any call
	HeapPerConn float64            `json:"server_heap_per_conn_bytes"`
	RSSPerConn  float64            `json:"server_rss_per_conn_bytes"`
	// The same under load: the last window's sample against the idle one.
	HeapPerConnLoaded float64      `json:"server_heap_per_conn_loaded_bytes"`
	RSSPerConnLoaded  float64      `json:"server_rss_per_conn_loaded_bytes"`
	Windows           []soakWindow `json:"windows"`
	Calls             int64        `json:"calls"`
	Errors            int64        `json:"errors"`
	Flat              bool         `json:"flat"`
	Growth            []string     `json:"growth"` // what grew, when not flat
	RateReached       bool         `json:"rate_reached"`
	LowestRate        float64      `json:"lowest_calls_per_sec"` // of the judged windows
	Judged            int          `json:"windows_judged"`
	GOMAXPROCS        int          `json:"gomaxprocs"`
	DialSec           float64      `json:"dial_sec"`
}

// compressed says, after the scenario's name, what compression the clients
// asked for: empty for none.
func (r *soakReport) compressed() string {
	if r.Compression == "" {
		return ""
	}
	return " (compressed: " + r.Compression + ")"
}

// Flatness: how much a peak may grow from the first half of the judged
// windows to the second; and the share of the calls asked for that each
// judged window must make.
const (
	soakRateReached      = 0.98
	soakGrowth           = 0.10
	soakGrowthBytes      = 8 << 20
	soakGrowthGoroutines = 16
)

func (c *cli) soak(f *soakFlags, args []string) error {
	sc := lookupScenario(f.scenario)
	switch {
	case len(args) > 0:
		return usagef("unexpected argument %q", args[0])
	case sc == nil:
		return usagef("-scenario is %q, want one of %s", f.scenario, strings.Join(scenarioNames(), ", "))
	case f.conns < 1:
		return usagef("-c is %d, want 1 or more", f.conns)
	case f.rate <= 0:
		return usagef("-rate is %v, want more than 0", f.rate)
	case f.duration <= 0 || f.warmup < 0 || f.every <= 0:
		return usagef("-d and -every want more than 0, -warmup 0 or more")
	case f.every > f.duration:
		return usagef("-every %v is longer than -d %v", f.every, f.duration)
	case f.timeout <= 0:
		return usagef("-timeout is %v, want more than 0", f.timeout)
	case f.addr == "" && f.sec.given():
		return usagef("the TLS and token flags go with -addr: the server soak starts itself serves plain TCP without authentication")
	}
	ctx, stop := c.interruptible()
	defer stop()

	target, stopTarget, err := c.loadTarget(ctx, f.addr, "-max-conns", strconv.Itoa(f.conns+16))
	if err != nil {
		return err
	}
	defer stopTarget()
	rep := &soakReport{Scenario: sc.name, Conns: f.conns, RatePerConn: f.rate, Server: target.String(), GOMAXPROCS: runtime.GOMAXPROCS(0)}
	rep.Compression = compressedName(f.compress.name)
	fmt.Fprintf(c.stderr, "soak: %s%s on %d connections × %v calls/s for %v after %v, server %s\n", sc.name, rep.compressed(), f.conns, f.rate, f.duration, f.warmup, rep.Server)

	bf := &benchFlags{timeout: f.timeout, maxFrame: proto.DefaultMaxFrameSize, sec: f.sec, compress: f.compress}
	statsCl, err := c.dialBench(ctx, target.addr, 1, bf)
	if err != nil {
		return err
	}
	defer statsCl[0].Close()
	sample := func() (builtin.StatsReply, error) {
		var st builtin.StatsReply
		sctx, cancel := context.WithTimeout(ctx, f.timeout)
		defer cancel()
		if err := statsCl[0].Call(sctx, builtin.Stats, nil, &st); err != nil {
			return st, errorIn("sampling the server ("+builtin.Stats+")", err)
		}
		return st, nil
	}
	if rep.Idle, err = sample(); err != nil {
		return err
	}

	began := time.Now()
	clients, err := c.dialBench(ctx, target.addr, f.conns, bf)
	if err != nil {
		return fmt.Errorf("%w (connection %d of %d)", err, len(clients)+1, f.conns)
	}
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	rep.DialSec = round(time.Since(began).Seconds(), 2)
	// A dial returns once the kernel has the connection, before the server
	// takes it in: sample until the server counts them all (or others too,
	// at -addr), for a bounded time.
	for settle := time.Now().Add(10 * time.Second); ; {
		if rep.Connected, err = sample(); err != nil {
			return err
		}
		if rep.Connected.Conns >= rep.Idle.Conns+f.conns || time.Now().After(settle) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	rep.HeapPerConn = perConn(rep.Connected.HeapInuse, rep.Idle.HeapInuse, f.conns)
	rep.RSSPerConn = perConn(rep.Connected.RSS, rep.Idle.RSS, f.conns)
	fmt.Fprintf(c.stderr, "soak: %d connections in %.1fs; server heap %s idle, %s connected (%s per connection)\n",
		f.conns, rep.DialSec, mib(rep.Idle.HeapInuse), mib(rep.Connected.HeapInuse), kib(rep.HeapPerConn))

	workers := make([]*benchWorker, f.conns)
	for w := range workers {
		workers[w] = &benchWorker{call: sc.newCall(clients[w], w)}
	}
	call := func(ctx context.Context, w int) (int, error) { return workers[w].do(ctx, f.timeout) }

	windows := int((f.warmup + f.duration + f.every - 1) / f.every)
	warmWindows := int(f.warmup / f.every)
	load := time.Now()
	for i := range windows {
		res, err := loadgen.Run(ctx, loadgen.Config{
			Callers: f.conns, Duration: f.every, Rate: f.rate * float64(f.conns), Classify: classifyBenchError,
		}, call)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return err
		}
		st, err := sample()
		if err != nil {
			return err
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		w := soakWindow{
			EndSec: round(time.Since(load).Seconds(), 1), Warmup: i < warmWindows,
			Calls: res.Calls, Errors: res.Errors, ErrorsBy: res.ErrorsBy,
			CallsPerSec: round(res.CallsPerSec, 1), P50US: res.P50US, P99US: res.P99US, MaxUS: res.MaxUS,
			Server: st, Client: soakProcess{Goroutines: runtime.NumGoroutine(), HeapInuse: ms.HeapInuse},
		}
		for _, wk := range workers {
			for kind, msg := range wk.firstErrors {
				if w.FirstErrors == nil {
					w.FirstErrors = map[string]string{}
				}
				if _, ok := w.FirstErrors[kind]; !ok {
					w.FirstErrors[kind] = msg
				}
			}
			wk.firstErrors = nil
		}
		rep.Windows = append(rep.Windows, w)
		rep.Calls += w.Calls
		rep.Errors += w.Errors
		if !f.jsonOut {
			fmt.Fprintf(c.stderr, "soak: %s\n", windowLine(w))
		}
		if ctx.Err() != nil {
			break
		}
	}
	judgeSoak(rep, f.rate*float64(f.conns))
	if err := c.writeSoak(rep, f.jsonOut); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return errors.New("rpcd: soak interrupted; the report covers the windows until then")
	}
	if rep.Errors > 0 || !rep.Flat || !rep.RateReached {
		return exitStatus(exitFail)
	}
	return nil
}

// judgeSoak decides whether the windows after the warm-up made the calls
// asked for (rate, in calls/s), and whether the server stayed flat over
// them: the peaks of the second half against those of the first.
func judgeSoak(rep *soakReport, rate float64) {
	var judged []soakWindow
	for _, w := range rep.Windows {
		if !w.Warmup {
			judged = append(judged, w)
		}
	}
	rep.Judged = len(judged)
	if n := len(rep.Windows); n > 0 {
		last := rep.Windows[n-1].Server
		rep.HeapPerConnLoaded = perConn(last.HeapInuse, rep.Idle.HeapInuse, rep.Conns)
		rep.RSSPerConnLoaded = perConn(last.RSS, rep.Idle.RSS, rep.Conns)
	}
	rep.RateReached = len(judged) > 0
	for i, w := range judged {
		if i == 0 || w.CallsPerSec < rep.LowestRate {
			rep.LowestRate = w.CallsPerSec
		}
	}
	if rep.LowestRate < soakRateReached*rate {
		rep.RateReached = false
	}
	rep.Flat = true
	if len(judged) < 2 {
		rep.Growth = append(rep.Growth, fmt.Sprintf("%d windows after the warm-up: too few to judge (need 2; lengthen -d or shorten -every)", len(judged)))
		rep.Flat = false
		return
	}
	first, second := judged[:len(judged)/2], judged[len(judged)/2:]
	peak := func(ws []soakWindow, v func(soakWindow) uint64) uint64 {
		var m uint64
		for _, w := range ws {
			m = max(m, v(w))
		}
		return m
	}
	check := func(what string, v func(soakWindow) uint64, slack uint64, unit func(uint64) string) {
		a, b := peak(first, v), peak(second, v)
		if b > a+max(uint64(float64(a)*soakGrowth), slack) {
			rep.Flat = false
			rep.Growth = append(rep.Growth, fmt.Sprintf("server %s grew from a peak of %s to %s", what, unit(a), unit(b)))
		}
	}
	check("heap in use", func(w soakWindow) uint64 { return w.Server.HeapInuse }, soakGrowthBytes, mib)
	check("resident memory", func(w soakWindow) uint64 { return w.Server.RSS }, soakGrowthBytes, mib)
	check("goroutines", func(w soakWindow) uint64 { return uint64(w.Server.Goroutines) }, soakGrowthGoroutines,
		func(n uint64) string { return strconv.FormatUint(n, 10) })
}

func perConn(with, without uint64, conns int) float64 {
	if with < without {
		return 0
	}
	return round(float64(with-without)/float64(conns), 0)
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func kib(b float64) string { return fmt.Sprintf("%.1f KiB", b/1024) }

// windowLine is a window in one line, for the progress on standard error.
func windowLine(w soakWindow) string {
	tag := ""
	if w.Warmup {
		tag = " (warm-up)"
	}
	return fmt.Sprintf("%6.0fs%s %.0f calls/s, %d errors, p99 %.0f µs; server heap %s, rss %s, %d goroutines, %d conns",
		w.EndSec, tag, w.CallsPerSec, w.Errors, w.P99US, mib(w.Server.HeapInuse), mib(w.Server.RSS), w.Server.Goroutines, w.Server.Conns)
}

func (c *cli) writeSoak(rep *soakReport, jsonOut bool) error {
	if jsonOut {
		if rep.Growth == nil {
			rep.Growth = []string{}
		}
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		return c.write(append(b, '\n'))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "soak: %s%s, %d connections × %v calls/s, server %s, GOMAXPROCS %d\n", rep.Scenario, rep.compressed(), rep.Conns, rep.RatePerConn, rep.Server, rep.GOMAXPROCS)
	fmt.Fprintf(&b, "server idle: heap %s, rss %s, %d goroutines; with the connections: heap %s, rss %s, %d goroutines\n",
		mib(rep.Idle.HeapInuse), mib(rep.Idle.RSS), rep.Idle.Goroutines, mib(rep.Connected.HeapInuse), mib(rep.Connected.RSS), rep.Connected.Goroutines)
	fmt.Fprintf(&b, "server memory per connection: heap %s, rss %s; under load (the last window): heap %s, rss %s\n\n",
		kib(rep.HeapPerConn), kib(rep.RSSPerConn), kib(rep.HeapPerConnLoaded), kib(rep.RSSPerConnLoaded))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "end s\tcalls/s\terrors\tp50 µs\tp99 µs\tmax µs\theap MiB\trss MiB\tgoroutines\tconns\tclient heap MiB\t")
	for _, w := range rep.Windows {
		end := strconv.FormatFloat(w.EndSec, 'f', 0, 64)
		if w.Warmup {
			end += " w"
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%d\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t%d\t%d\t%.1f\t\n", end, w.CallsPerSec, w.Errors, w.P50US, w.P99US, w.MaxUS,
			float64(w.Server.HeapInuse)/(1<<20), float64(w.Server.RSS)/(1<<20), w.Server.Goroutines, w.Server.Conns, float64(w.Client.HeapInuse)/(1<<20))
	}
	tw.Flush()
	fmt.Fprintf(&b, "\ncalls %d, errors %d", rep.Calls, rep.Errors)
	var kinds []string
	for _, w := range rep.Windows {
		for k := range w.ErrorsBy {
			if !slices.Contains(kinds, k) {
				kinds = append(kinds, k)
			}
		}
	}
	if len(kinds) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(kinds, ", "))
	}
	b.WriteString("\n")
	for _, w := range rep.Windows {
		for k, m := range w.FirstErrors {
			fmt.Fprintf(&b, "  first %s at %.0fs: %s\n", k, w.EndSec, m)
		}
	}
	if !rep.RateReached {
		fmt.Fprintf(&b, "RATE NOT REACHED: a window after the warm-up made %.0f calls/s of the %.0f asked for; this machine cannot drive the load (its latencies then hide a backlog)\n",
			rep.LowestRate, rep.RatePerConn*float64(rep.Conns))
	}
	if rep.Flat {
		fmt.Fprintf(&b, "flat: server heap, rss and goroutines over %d windows after the warm-up\n", rep.Judged)
	} else {
		fmt.Fprintf(&b, "NOT FLAT:\n  %s\n", strings.Join(rep.Growth, "\n  "))
	}
	return c.write([]byte(b.String()))
}
