package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/rpcd/rpcd/bench/internal/stat"
)

// report is everything a run measured; it is also the JSON written by -json.
type report struct {
	Machine    machine      `json:"machine"`
	Settings   settings     `json:"settings"`
	Cells      []cellReport `json:"cells"`
	Notes      []string     `json:"notes"`
	ElapsedSec float64      `json:"elapsed_sec"`
}

type cellReport struct {
	cell
	Server  string         `json:"server"` // where the servers ran
	Systems []systemReport `json:"systems"`
}

type systemReport struct {
	System string      `json:"system"`
	Runs   []runResult `json:"runs"`
	Median *summary    `json:"median,omitempty"`
	// Ratios to rpcd's medians: calls/s (higher is better) and CPU per call
	// (lower is better).
	CallsPerSecVsRPCD float64 `json:"calls_per_sec_vs_rpcd,omitempty"`
	CPUPerCallVsRPCD  float64 `json:"cpu_per_call_vs_rpcd,omitempty"`
	Errors            int64   `json:"errors"`
	Failed            string  `json:"failed,omitempty"` // why no run produced figures
}

// summary holds the median of each figure over the runs that produced
// figures; each median is taken on its own.
type summary struct {
	OKRuns             int     `json:"ok_runs"`
	CallsPerSec        float64 `json:"calls_per_sec"`
	MBPerSec           float64 `json:"mb_per_sec"`
	P50US              float64 `json:"p50_us"`
	P99US              float64 `json:"p99_us"`
	CPUPerCallUS       float64 `json:"cpu_per_call_us"`
	ClientCPUPerCallUS float64 `json:"client_cpu_per_call_us"`
	ServerCPUPerCallUS float64 `json:"server_cpu_per_call_us"`
}

func median(xs []float64) float64 { return stat.Median(xs, func(x float64) float64 { return x }) }

// summarize fills sr's medians, errors and failure from its runs.
func (sr *systemReport) summarize() {
	var ok []runResult
	sr.Errors = 0
	for _, r := range sr.Runs {
		sr.Errors += r.Errors
		if r.ok() {
			ok = append(ok, r)
		} else if sr.Failed == "" && r.Failed != "" {
			sr.Failed = r.Failed
		}
	}
	if len(ok) == 0 {
		if sr.Failed == "" {
			sr.Failed = "no calls completed"
		}
		return
	}
	if len(ok) == len(sr.Runs) {
		sr.Failed = ""
	}
	pick := func(f func(runResult) float64) float64 {
		xs := make([]float64, len(ok))
		for i, r := range ok {
			xs[i] = f(r)
		}
		return median(xs)
	}
	sr.Median = &summary{
		OKRuns:             len(ok),
		CallsPerSec:        pick(func(r runResult) float64 { return r.CallsPerSec }),
		MBPerSec:           pick(func(r runResult) float64 { return r.MBPerSec }),
		P50US:              pick(func(r runResult) float64 { return r.P50US }),
		P99US:              pick(func(r runResult) float64 { return r.P99US }),
		CPUPerCallUS:       pick(func(r runResult) float64 { return r.CPUPerCallUS }),
		ClientCPUPerCallUS: pick(func(r runResult) float64 { return r.ClientCPUPerCallUS }),
		ServerCPUPerCallUS: pick(func(r runResult) float64 { return r.ServerCPUPerCallUS }),
	}
}

// ratios sets every system's ratios to rpcd's medians, if rpcd has them.
func (cr *cellReport) ratios() {
	i := slices.IndexFunc(cr.Systems, func(s systemReport) bool { return s.System == "rpcd" })
	if i < 0 || cr.Systems[i].Median == nil {
		return
	}
	base := cr.Systems[i].Median
	for j := range cr.Systems {
		m := cr.Systems[j].Median
		if m == nil {
			continue
		}
		if base.CallsPerSec > 0 {
			cr.Systems[j].CallsPerSecVsRPCD = m.CallsPerSec / base.CallsPerSec
		}
		if base.CPUPerCallUS > 0 {
			cr.Systems[j].CPUPerCallVsRPCD = m.CPUPerCallUS / base.CPUPerCallUS
		}
	}
}

// run measures every system in every cell, runs times each, interleaving
// the systems within a cell, and prints each cell's table as it finishes.
// It reports whether any run failed or had errors.
func (rep *report) run(cells []cell, names []string, d, warmup time.Duration, runs int, inproc bool, stdout, stderr io.Writer) (failed bool) {
	servers := map[string]*server{}
	startErr := map[string]error{}
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	// ensure returns name's server, started or restarted as needed.
	ensure := func(name string) (*server, error) {
		if s := servers[name]; s != nil {
			if s.alive() {
				return s, nil
			}
			fmt.Fprintf(stderr, "bench: the %s server exited; starting another\n", name)
			s.stop()
			delete(servers, name)
		}
		if err := startErr[name]; err != nil {
			return nil, err
		}
		s, err := startServer(systems[name], inproc)
		if err != nil {
			startErr[name] = err
			return nil, err
		}
		servers[name] = s
		return s, nil
	}
	for _, name := range names {
		if _, err := ensure(name); err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
		}
	}

	for _, c := range cells {
		cr := cellReport{cell: c, Server: "separate process"}
		if inproc {
			cr.Server = "in-process"
		}
		byName := map[string]*systemReport{}
		for _, n := range names {
			cr.Systems = append(cr.Systems, systemReport{System: n})
		}
		for i := range cr.Systems {
			byName[cr.Systems[i].System] = &cr.Systems[i]
		}
		for r := range runs {
			for pos, name := range order(names, r) {
				var res runResult
				if srv, err := ensure(name); err != nil {
					res.Failed = err.Error()
				} else {
					res = measure(systems[name], srv, c, d, warmup, 0)
				}
				res.Run, res.Position = r+1, pos
				byName[name].Runs = append(byName[name].Runs, res)
				fmt.Fprintf(stderr, "%-12s run %d/%d  %-10s %s\n", c.Name, r+1, runs, name, res.brief())
			}
		}
		for i := range cr.Systems {
			cr.Systems[i].summarize()
			if cr.Systems[i].Failed != "" || cr.Systems[i].Errors > 0 {
				failed = true
			}
		}
		cr.ratios()
		rep.Cells = append(rep.Cells, cr)
		rep.printCell(stdout, &cr)
	}
	return failed
}

func (r runResult) brief() string {
	if r.Failed != "" && r.Calls == 0 {
		return "FAILED: " + r.Failed
	}
	s := fmt.Sprintf("%9.0f calls/s  p50 %7.1f µs  p99 %8.1f µs  CPU %6.1f µs/call", r.CallsPerSec, r.P50US, r.P99US, r.CPUPerCallUS)
	if r.Errors > 0 {
		s += fmt.Sprintf("  %d errors %v", r.Errors, r.ErrorsBy)
	}
	if r.Failed != "" {
		s += "  (" + r.Failed + ")"
	}
	return s
}

func (rep *report) printHeader(w io.Writer) {
	m, s := rep.Machine, rep.Settings
	fmt.Fprintf(w, "rpcd bench · %s\n", s.Started)
	fmt.Fprintf(w, "machine: %s · %d CPUs · %s · GOMAXPROCS=%d · %s %s/%s · kernel %s\n",
		m.CPUModel, m.NumCPU, m.MemTotal, m.GOMAXPROCS, m.GoVersion, m.OS, m.Arch, m.Kernel)
	fmt.Fprintf(w, "command: %s\n", s.Command)
	fmt.Fprintf(w, "servers: %s · %s measured + %s warm-up per system per run · median of %d runs, systems interleaved\n",
		s.Server, s.Duration, s.Warmup, s.Runs)
}

func (rep *report) printCell(w io.Writer, cr *cellReport) {
	fmt.Fprintf(w, "\n== %s: %s · servers %s · median of %d runs\n", cr.Name, cr.describe(), cr.Server, rep.Settings.Runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tcalls/s\t×rpcd\tp50 µs\tp99 µs\tCPU µs/call\t(client+server)\tCPU ×rpcd\tMB/s\terrors\t")
	for _, s := range cr.Systems {
		m := s.Median
		if m == nil {
			fmt.Fprintf(tw, "%s\t%s\t\t\t\t\t\t\t\t%d\t\n", s.System, "failed", s.Errors)
			continue
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%.1f\t%.1f\t%.1f\t(%.1f+%.1f)\t%s\t%.1f\t%d\t\n",
			s.System, m.CallsPerSec, ratio(s.CallsPerSecVsRPCD), m.P50US, m.P99US,
			m.CPUPerCallUS, m.ClientCPUPerCallUS, m.ServerCPUPerCallUS, ratio(s.CPUPerCallVsRPCD),
			m.MBPerSec, s.Errors)
	}
	tw.Flush()
	for _, s := range cr.Systems {
		if s.Failed != "" {
			ok := 0
			if s.Median != nil {
				ok = s.Median.OKRuns
			}
			fmt.Fprintf(w, "  %s: %d of %d runs ok; %s\n", s.System, ok, len(s.Runs), s.Failed)
		}
		if s.Errors > 0 {
			kinds := map[string]int64{}
			for _, r := range s.Runs {
				for k, v := range r.ErrorsBy {
					kinds[k] += v
				}
			}
			fmt.Fprintf(w, "  %s errors: %v\n", s.System, kinds)
		}
	}
}

func ratio(x float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", x)
}

func (rep *report) printNotes(w io.Writer) {
	fmt.Fprintf(w, "\nnotes:\n")
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	fmt.Fprintf(w, "elapsed: %s\n", time.Duration(rep.ElapsedSec*float64(time.Second)).Round(time.Second))
}

// notes explain the tables.
func notes(m machine, inproc bool) []string {
	cpu := fmt.Sprintf("CPU µs/call: over the measured window, (this load process's user+system time from getrusage) + (the server process's utime+stime from /proc/PID/stat, in 1/%d s ticks), divided by the calls.", m.ClockTicks)
	if inproc {
		cpu = "CPU µs/call: servers ran in-process, so it is the one process's user+system time (getrusage) over the measured window, divided by the calls; the server column is 0. rpcd's server runs the reactor's default event loops here, one fewer than GOMAXPROCS, which leaves the client a P; the gnet floor keeps a loop per P, whose busy loops leave the client's goroutines to sysmon's polls of Go's network poller (docs/performance.md, \"Event loops and Ps\")."
	}
	return []string{
		"Each figure (calls/s, p50, p99, CPU/call) is the median over runs, taken separately; ×rpcd is the system's median over rpcd's: calls/s (higher is better), CPU per call (lower is better).",
		cpu,
		"MB/s counts request plus reply payload. Every reply is checked byte for byte against its request (a per-caller pattern stamped with a per-call sequence number); errors counts failed and wrong replies over all runs.",
		"Cells are conns × callers per conn. rpcd's client sends a call to a connection no one is reading first (the one freed last), then to one only its listener reads, else round robin; every other client but Kitex's pins caller w to connection w % conns.",
		"tcp-floor and gnet-floor have no multiplexing: callers sharing a connection take turns under a mutex, so their 1x128 cells measure 128 callers queueing for one ping-pong.",
		"drpc runs one RPC at a time per connection by design (its README points to a connection pool); callers sharing a connection queue for it.",
		"kitex runs one call at a time per connection and pools connections (its multiplexing transport is deprecated): it opens a connection per caller, 128 in the 1x128 cells.",
		fmt.Sprintf("Client, servers and everything else on this machine share its %d CPUs over loopback; peers run with their documented defaults, untuned beyond what README.md lists.", m.NumCPU),
		"Systems run in a different order in each run (run r starts with the r-th system, forward on even runs, backward on odd ones); the client runs a GC before each measurement.",
	}
}
