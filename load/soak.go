package load

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/cputime"
	"github.com/rpcd/rpcd/internal/loadgen"
)

// SoakConfig is a soak for Soak: Conns connections with one caller each,
// calling Scenario Rate times a second each, in an open loop, for Duration
// after Warmup, reported and judged window by window.
//
// A connection's call goes at its time while fewer than Pipeline of its
// calls are unanswered; past that it waits for an answer, and counts its
// latency from its time. Calls a connection finds due together go in one
// write. Pipeline 1 has each call wait for the one before. (A service
// Addr, or a scenario without frames, runs each connection's calls one at
// a time.)
type SoakConfig struct {
	Addr   string         // the server: "host:port" or "unix:///path"; it must serve builtin.Stats
	Server string         // how the report names the server; Addr if empty
	Client client.Options // the options of every client, each of one connection

	Scenario Scenario      // the load; EchoPacket16 if its NewCall is nil
	Conns    int           // connections, one caller each; 1000 if 0
	Rate     float64       // calls/s on each connection; 100 if 0
	Pipeline int           // calls in flight at most on a connection; DefaultPipeline if 0
	Duration time.Duration // how long to measure after the warm-up; 5 minutes if 0
	Warmup   time.Duration // how long to call before judging flatness (its windows are reported too)
	Every    time.Duration // the length of a window: a line and a sample of the server; 10 s if 0
	Timeout  time.Duration // each call's deadline and each sample's; 5 s if 0

	// Connected, if not nil, is called once the connections are open and
	// the server has been sampled with them, with the report so far.
	Connected func(*SoakReport)
	// Window, if not nil, is called with each window as it ends.
	Window func(SoakWindow)
}

// DefaultPipeline is SoakConfig.Pipeline's default: a connection late by
// a call still sends the next at its time. At 10,000 × 10/s on the 2-core
// machine of docs/performance.md, which cannot answer 100,000 calls a
// second one call a write, 2 reached the rate as 3 and 4 did, with the
// lowest p99 and load-generator heap of the three (bench/scripts/
// soak_pipeline.py).
const DefaultPipeline = 2

// SoakWindow is one window of a soak: the load's figures and a sample of
// the server at its end.
type SoakWindow struct {
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
	Client      SoakProcess        `json:"client"`
}

// SoakProcess is a sample of this process, the load generator.
type SoakProcess struct {
	Goroutines int    `json:"goroutines"`
	HeapInuse  uint64 `json:"heap_inuse"`
	RSS        uint64 `json:"rss,omitempty"` // resident set size; 0 where unknown
	// CPU per call over the window: this process's, and the server's
	// (from its builtin.Stats; 0 where it reports none).
	CPUPerCallUS       float64 `json:"cpu_per_call_us"`
	ServerCPUPerCallUS float64 `json:"server_cpu_per_call_us,omitempty"`
}

// SoakReport is a whole soak, with the field names of rpcd soak -json.
type SoakReport struct {
	Scenario    string             `json:"scenario"`
	Conns       int                `json:"conns"`
	RatePerConn float64            `json:"rate_per_conn"`
	Pipeline    int                `json:"pipeline"`              // calls in flight at most on a connection
	Compression string             `json:"compression,omitempty"` // what the clients ask for
	Server      string             `json:"server"`
	Idle        builtin.StatsReply `json:"server_idle"`      // before the load's connections
	Connected   builtin.StatsReply `json:"server_connected"` // with them, before any call
	HeapPerConn float64            `json:"server_heap_per_conn_bytes"`
	RSSPerConn  float64            `json:"server_rss_per_conn_bytes"`
	// The same under load: the last window's sample against the idle one.
	HeapPerConnLoaded float64      `json:"server_heap_per_conn_loaded_bytes"`
	RSSPerConnLoaded  float64      `json:"server_rss_per_conn_loaded_bytes"`
	Windows           []SoakWindow `json:"windows"`
	Calls             int64        `json:"calls"`
	Errors            int64        `json:"errors"`
	Flat              bool         `json:"flat"`
	Growth            []string     `json:"growth"` // what grew, when not flat; never null
	RateReached       bool         `json:"rate_reached"`
	LowestRate        float64      `json:"lowest_calls_per_sec"` // of the judged windows
	Judged            int          `json:"windows_judged"`
	GOMAXPROCS        int          `json:"gomaxprocs"`
	DialSec           float64      `json:"dial_sec"`
	// The load generator's (this process's) memory per connection: heap
	// in use, and resident memory, with the connections open against
	// before them; and under load (the last window's sample).
	ClientHeapPerConn       float64 `json:"client_heap_per_conn_bytes"`
	ClientRSSPerConn        float64 `json:"client_rss_per_conn_bytes"`
	ClientHeapPerConnLoaded float64 `json:"client_heap_per_conn_loaded_bytes"`
	// CPU per call over the judged windows: this process's, the server's.
	CPUPerCallUS       float64 `json:"cpu_per_call_us"`
	ServerCPUPerCallUS float64 `json:"server_cpu_per_call_us,omitempty"`
	P99US              float64 `json:"p99_us"` // the highest p99 of the judged windows
	clientIdle         builtin.StatsReply
}

// MarshalJSON writes r with Growth an array even when empty.
func (r SoakReport) MarshalJSON() ([]byte, error) {
	type plain SoakReport // without this method
	if r.Growth == nil {
		r.Growth = []string{}
	}
	return json.Marshal(plain(r))
}

// Passed reports whether the soak passed: no call failed, every window
// after the warm-up made the calls asked for, and the server stayed flat.
func (r *SoakReport) Passed() bool { return r.Errors == 0 && r.Flat && r.RateReached }

// compressed says, after the scenario's name, what compression the clients
// asked for: empty for none.
func (r *SoakReport) compressed() string {
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

// Soak samples the server idle through builtin.Stats (Sys/Stats), opens
// cfg.Conns connections and samples it again, then calls cfg.Scenario on
// every connection cfg.Rate times a second (open loop: each call at its
// scheduled time, its latency counted from then) for cfg.Duration after
// cfg.Warmup, window by window, sampling the server at the end of each.
//
// The report judges the windows after the warm-up: the rate was reached
// if each made at least 98 % of the calls asked for; the server stayed
// flat if the peaks of its heap in use, resident memory and goroutines in
// the second half of those windows are at most 10 % (and 8 MiB, or 16
// goroutines) above those of the first half. Passed sums it up.
//
// If ctx ends during the load, Soak returns the report of the windows until
// then, judged, with ctx's error.
func Soak(ctx context.Context, cfg SoakConfig) (*SoakReport, error) {
	switch {
	case cfg.Addr == "":
		return nil, errors.New("rpcd: load: no Addr")
	case cfg.Conns < 0 || cfg.Rate < 0 || cfg.Duration < 0 || cfg.Warmup < 0 || cfg.Every < 0 || cfg.Timeout < 0 || cfg.Pipeline < 0:
		return nil, errors.New("rpcd: load: a negative Conns, Rate, Pipeline, Duration, Warmup, Every or Timeout")
	}
	if cfg.Scenario.NewCall == nil {
		cfg.Scenario, _ = LookupScenario("EchoPacket16")
	}
	if cfg.Conns == 0 {
		cfg.Conns = 1000
	}
	if cfg.Rate == 0 {
		cfg.Rate = 100
	}
	if cfg.Pipeline == 0 {
		cfg.Pipeline = DefaultPipeline
	}
	if cfg.Duration == 0 {
		cfg.Duration = 5 * time.Minute
	}
	if cfg.Every == 0 {
		cfg.Every = min(10*time.Second, cfg.Duration)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultTimeout
	}
	if cfg.Server == "" {
		cfg.Server = cfg.Addr
	}
	sc := cfg.Scenario
	rep := &SoakReport{Scenario: sc.Name, Conns: cfg.Conns, RatePerConn: cfg.Rate, Pipeline: 1, Server: cfg.Server, GOMAXPROCS: runtime.GOMAXPROCS(0)}
	rep.Compression = compressionName(cfg.Client)

	statsCl, err := dialClients(ctx, cfg.Addr, 1, cfg.Client)
	if err != nil {
		return nil, err
	}
	defer statsCl[0].Close()
	sample := func() (builtin.StatsReply, error) {
		var st builtin.StatsReply
		sctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
		if err := statsCl[0].Call(sctx, builtin.Stats, nil, &st); err != nil {
			return st, errorIn("sampling the server ("+builtin.Stats+")", err)
		}
		return st, nil
	}
	if rep.Idle, err = sample(); err != nil {
		return nil, err
	}

	runtime.GC()
	rep.clientIdle = builtin.ReadStats(nil)
	began := time.Now()
	var ld soakLoad
	wcfg := driverConfig{addr: cfg.Addr, opts: cfg.Client, sc: cfg.Scenario,
		conns: cfg.Conns, inflight: 1, rate: cfg.Rate * float64(cfg.Conns), timeout: cfg.Timeout, depth: cfg.Pipeline}
	if asyncCan(cfg.Addr, sc) {
		rep.Pipeline = cfg.Pipeline
		var d *asyncDriver
		if d, err = dialAsync(ctx, wcfg); err == nil {
			ld = &soakPhased{d: d, conns: cfg.Conns}
		}
	} else {
		ld, err = dialSoakClients(ctx, cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("%w (opening %d connections)", err, cfg.Conns)
	}
	defer ld.close()
	rep.DialSec = round(time.Since(began).Seconds(), 2)
	runtime.GC()
	connected := builtin.ReadStats(nil)
	rep.ClientHeapPerConn = perConn(connected.HeapInuse, rep.clientIdle.HeapInuse, cfg.Conns)
	rep.ClientRSSPerConn = perConn(connected.RSS, rep.clientIdle.RSS, cfg.Conns)
	// A dial returns once the kernel has the connection, before the server
	// takes it in: sample until the server counts them all (or others too,
	// at -addr), for a bounded time.
	for settle := time.Now().Add(10 * time.Second); ; {
		if rep.Connected, err = sample(); err != nil {
			return nil, err
		}
		if rep.Connected.Conns >= rep.Idle.Conns+cfg.Conns || time.Now().After(settle) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	rep.HeapPerConn = perConn(rep.Connected.HeapInuse, rep.Idle.HeapInuse, cfg.Conns)
	rep.RSSPerConn = perConn(rep.Connected.RSS, rep.Idle.RSS, cfg.Conns)
	if cfg.Connected != nil {
		cfg.Connected(rep)
	}

	windows := int((cfg.Warmup + cfg.Duration + cfg.Every - 1) / cfg.Every)
	warmWindows := int(cfg.Warmup / cfg.Every)
	load := time.Now()
	last, err := sample()
	if err != nil {
		return nil, err
	}
	for i := range windows {
		cpu0 := cputime.Process()
		res, first, err := ld.window(ctx, cfg.Every)
		cpu := cputime.Process() - cpu0
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return nil, err
		}
		st, err := sample()
		if err != nil {
			return nil, err
		}
		self := builtin.ReadStats(nil)
		w := SoakWindow{
			EndSec: round(time.Since(load).Seconds(), 1), Warmup: i < warmWindows,
			Calls: res.Calls, Errors: res.Errors, ErrorsBy: res.ErrorsBy, FirstErrors: first,
			CallsPerSec: round(res.CallsPerSec, 1), P50US: res.P50US, P99US: res.P99US, MaxUS: res.MaxUS,
			Server: st, Client: SoakProcess{Goroutines: self.Goroutines, HeapInuse: self.HeapInuse, RSS: self.RSS},
		}
		if res.Calls > 0 {
			w.Client.CPUPerCallUS = round(float64(cpu.Nanoseconds())/1e3/float64(res.Calls), 3)
			if st.CPUSec > 0 && last.CPUSec > 0 {
				w.Client.ServerCPUPerCallUS = round((st.CPUSec-last.CPUSec)*1e6/float64(res.Calls), 3)
			}
		}
		last = st
		if len(w.FirstErrors) == 0 {
			w.FirstErrors = nil
		}
		rep.Windows = append(rep.Windows, w)
		rep.Calls += w.Calls
		rep.Errors += w.Errors
		if cfg.Window != nil {
			cfg.Window(w)
		}
		if ctx.Err() != nil {
			break
		}
	}
	judgeSoak(rep, cfg.Rate*float64(cfg.Conns))
	return rep, ctx.Err()
}

// judgeSoak decides whether the windows after the warm-up made the calls
// asked for (rate, in calls/s), and whether the server stayed flat over
// them: the peaks of the second half against those of the first.
func judgeSoak(rep *SoakReport, rate float64) {
	var judged []SoakWindow
	for _, w := range rep.Windows {
		if !w.Warmup {
			judged = append(judged, w)
		}
	}
	rep.Judged = len(judged)
	if n := len(rep.Windows); n > 0 {
		last := rep.Windows[n-1]
		rep.HeapPerConnLoaded = perConn(last.Server.HeapInuse, rep.Idle.HeapInuse, rep.Conns)
		rep.RSSPerConnLoaded = perConn(last.Server.RSS, rep.Idle.RSS, rep.Conns)
		rep.ClientHeapPerConnLoaded = perConn(last.Client.HeapInuse, rep.clientIdle.HeapInuse, rep.Conns)
	}
	var calls, cpu, srv float64
	for _, w := range judged {
		calls += float64(w.Calls)
		cpu += w.Client.CPUPerCallUS * float64(w.Calls)
		srv += w.Client.ServerCPUPerCallUS * float64(w.Calls)
		rep.P99US = max(rep.P99US, w.P99US)
	}
	if calls > 0 {
		rep.CPUPerCallUS = round(cpu/calls, 3)
		rep.ServerCPUPerCallUS = round(srv/calls, 3)
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
	peak := func(ws []SoakWindow, v func(SoakWindow) uint64) uint64 {
		var m uint64
		for _, w := range ws {
			m = max(m, v(w))
		}
		return m
	}
	check := func(what string, v func(SoakWindow) uint64, slack uint64, unit func(uint64) string) {
		a, b := peak(first, v), peak(second, v)
		if b > a+max(uint64(float64(a)*soakGrowth), slack) {
			rep.Flat = false
			rep.Growth = append(rep.Growth, fmt.Sprintf("server %s grew from a peak of %s to %s", what, unit(a), unit(b)))
		}
	}
	check("heap in use", func(w SoakWindow) uint64 { return w.Server.HeapInuse }, soakGrowthBytes, mib)
	check("resident memory", func(w SoakWindow) uint64 { return w.Server.RSS }, soakGrowthBytes, mib)
	check("goroutines", func(w SoakWindow) uint64 { return uint64(w.Server.Goroutines) }, soakGrowthGoroutines,
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

// String is the window in one line, as rpcd soak prints it while it runs.
func (w SoakWindow) String() string {
	tag := ""
	if w.Warmup {
		tag = " (warm-up)"
	}
	return fmt.Sprintf("%6.0fs%s %.0f calls/s, %d errors, p99 %.0f µs; server heap %s, rss %s, %d goroutines, %d conns",
		w.EndSec, tag, w.CallsPerSec, w.Errors, w.P99US, mib(w.Server.HeapInuse), mib(w.Server.RSS), w.Server.Goroutines, w.Server.Conns)
}

// ConnectedText is the line rpcd soak prints once the connections are
// open: how long they took and the server's heap per connection.
func (r *SoakReport) ConnectedText() string {
	return fmt.Sprintf("%d connections in %.1fs; server heap %s idle, %s connected (%s per connection)",
		r.Conns, r.DialSec, mib(r.Idle.HeapInuse), mib(r.Connected.HeapInuse), kib(r.HeapPerConn))
}

// WriteText writes r as rpcd soak prints it: the server idle and
// connected, a table of the windows, the calls and errors, and the
// verdicts on the rate and on flatness.
func (r *SoakReport) WriteText(w io.Writer) error {
	var b strings.Builder
	inflight := ""
	if r.Pipeline > 1 {
		inflight = fmt.Sprintf(" (up to %d in flight each)", r.Pipeline)
	}
	fmt.Fprintf(&b, "soak: %s%s, %d connections × %v calls/s%s, server %s, GOMAXPROCS %d\n", r.Scenario, r.compressed(), r.Conns, r.RatePerConn, inflight, r.Server, r.GOMAXPROCS)
	fmt.Fprintf(&b, "server idle: heap %s, rss %s, %d goroutines; with the connections: heap %s, rss %s, %d goroutines\n",
		mib(r.Idle.HeapInuse), mib(r.Idle.RSS), r.Idle.Goroutines, mib(r.Connected.HeapInuse), mib(r.Connected.RSS), r.Connected.Goroutines)
	fmt.Fprintf(&b, "server memory per connection: heap %s, rss %s; under load (the last window): heap %s, rss %s\n",
		kib(r.HeapPerConn), kib(r.RSSPerConn), kib(r.HeapPerConnLoaded), kib(r.RSSPerConnLoaded))
	fmt.Fprintf(&b, "load generator per connection: heap %s, rss %s; under load: heap %s\n",
		kib(r.ClientHeapPerConn), kib(r.ClientRSSPerConn), kib(r.ClientHeapPerConnLoaded))
	server := "not reported"
	if r.ServerCPUPerCallUS > 0 {
		server = fmt.Sprintf("%.2f µs", r.ServerCPUPerCallUS)
	}
	fmt.Fprintf(&b, "CPU per call after the warm-up: load generator %.2f µs, server %s\n\n", r.CPUPerCallUS, server)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "end s\tcalls/s\terrors\tp50 µs\tp99 µs\tmax µs\theap MiB\trss MiB\tgoroutines\tconns\tclient heap MiB\t")
	for _, w := range r.Windows {
		end := strconv.FormatFloat(w.EndSec, 'f', 0, 64)
		if w.Warmup {
			end += " w"
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%d\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t%d\t%d\t%.1f\t\n", end, w.CallsPerSec, w.Errors, w.P50US, w.P99US, w.MaxUS,
			float64(w.Server.HeapInuse)/(1<<20), float64(w.Server.RSS)/(1<<20), w.Server.Goroutines, w.Server.Conns, float64(w.Client.HeapInuse)/(1<<20))
	}
	tw.Flush()
	fmt.Fprintf(&b, "\ncalls %d, errors %d", r.Calls, r.Errors)
	var kinds []string
	for _, w := range r.Windows {
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
	for _, w := range r.Windows {
		for k, m := range w.FirstErrors {
			fmt.Fprintf(&b, "  first %s at %.0fs: %s\n", k, w.EndSec, m)
		}
	}
	if !r.RateReached {
		fmt.Fprintf(&b, "RATE NOT REACHED: a window after the warm-up made %.0f calls/s of the %.0f asked for; this machine cannot drive the load (its latencies then hide a backlog)\n",
			r.LowestRate, r.RatePerConn*float64(r.Conns))
	}
	if r.Flat {
		fmt.Fprintf(&b, "flat: server heap, rss and goroutines over %d windows after the warm-up\n", r.Judged)
	} else {
		fmt.Fprintf(&b, "NOT FLAT:\n  %s\n", strings.Join(r.Growth, "\n  "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// soakLoad is what makes a soak's calls, window by window: the driver
// (soakPhased), or a client and a caller goroutine per connection
// (soakClients).
type soakLoad interface {
	// window makes calls for d, or until ctx ends, and returns what they
	// made, with the first message of each kind of error among them.
	window(ctx context.Context, d time.Duration) (loadgen.Result, map[string]string, error)
	close()
}

// soakClients is a soak's load on clients of one connection each, a
// caller goroutine each, through loadgen.Run: between windows the calls
// pause while the server is sampled.
type soakClients struct {
	cfg     SoakConfig
	clients []*client.Client
	workers []*worker
}

func dialSoakClients(ctx context.Context, cfg SoakConfig) (*soakClients, error) {
	clients, err := dialClients(ctx, cfg.Addr, cfg.Conns, cfg.Client)
	if err != nil {
		return nil, err
	}
	l := &soakClients{cfg: cfg, clients: clients, workers: make([]*worker, cfg.Conns)}
	for w := range l.workers {
		l.workers[w] = &worker{call: cfg.Scenario.NewCall(clients[w], w)}
	}
	return l, nil
}

func (l *soakClients) window(ctx context.Context, d time.Duration) (loadgen.Result, map[string]string, error) {
	call := func(ctx context.Context, w int) (int, error) { return l.workers[w].do(ctx, l.cfg.Timeout) }
	res, err := loadgen.Run(ctx, loadgen.Config{
		Callers: l.cfg.Conns, Duration: d, Rate: l.cfg.Rate * float64(l.cfg.Conns), Classify: classify,
	}, call)
	first := map[string]string{}
	for _, wk := range l.workers {
		for kind, msg := range wk.firstErrors {
			if _, ok := first[kind]; !ok {
				first[kind] = msg
			}
		}
		wk.firstErrors = nil
	}
	return res, first, err
}

func (l *soakClients) close() {
	for _, cl := range l.clients {
		cl.Close()
	}
}

// soakPhased is a soak's load on the driver: one phase for the whole soak,
// its Recorder swapped at each window's end, so that the calls go on while
// the server is sampled.
type soakPhased struct {
	d     *asyncDriver
	conns int
	rec   *loadgen.Recorder
	from  time.Time // the window's start
}

func (l *soakPhased) window(ctx context.Context, d time.Duration) (loadgen.Result, map[string]string, error) {
	if l.rec == nil {
		l.rec = loadgen.NewRecorder(l.conns)
		l.d.takeFirstErrors()
		l.from = time.Now()
		l.d.start(l.rec, 0)
	}
	t := time.NewTimer(time.Until(l.from.Add(d)))
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	next := loadgen.NewRecorder(l.conns)
	done := l.d.swap(next)
	now := time.Now()
	res := done.Result(now.Sub(l.from), 0)
	l.rec, l.from = next, now
	return res, l.d.takeFirstErrors(), nil
}

func (l *soakPhased) close() { l.d.close() }
