package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/rpcd/rpcd/internal/loadgen"
)

// benchReport is one run's results, as -json writes them.
type benchReport struct {
	Calls        int64             `json:"calls"`
	Errors       int64             `json:"errors"`
	ErrorsBy     map[string]int64  `json:"errors_by"`              // never null
	FirstErrors  map[string]string `json:"first_errors,omitempty"` // an example message per kind
	ElapsedSec   float64           `json:"elapsed_sec"`
	CallsPerSec  float64           `json:"calls_per_sec"`
	BytesPerSec  float64           `json:"bytes_per_sec"`
	MeanUS       float64           `json:"mean_us"`
	P50US        float64           `json:"p50_us"`
	P90US        float64           `json:"p90_us"`
	P99US        float64           `json:"p99_us"`
	P999US       float64           `json:"p999_us"`
	MaxUS        float64           `json:"max_us"`
	CPUPerCallUS float64           `json:"cpu_per_call_us"`
	// With -rate: whether calls/s came to rateReachedShare of it, and if
	// not, what held it back, as the warning on standard error says.
	RateReached   *bool         `json:"rate_reached,omitempty"`
	RateShortfall string        `json:"rate_shortfall,omitempty"`
	Runs          int           `json:"runs"` // the median of this many; errors are their sum
	Settings      benchSettings `json:"settings"`
}

// benchSettings is how a run was made.
type benchSettings struct {
	Scenario     string  `json:"scenario"` // "custom" for -route
	Route        string  `json:"route"`
	Codec        string  `json:"codec"`              // "json" or "raw"
	Compress     string  `json:"compress,omitempty"` // -compress, when given
	PayloadBytes int     `json:"payload_bytes"`      // request payload, encoded; Sum's varies
	Addr         string  `json:"addr"`
	Server       string  `json:"server"` // "child" or "external"
	ChildPID     int     `json:"child_pid,omitempty"`
	Connections  int     `json:"connections"`
	Inflight     int     `json:"inflight"`
	Callers      int     `json:"callers"`
	Duration     string  `json:"duration,omitempty"` // when it ran for a time
	N            int64   `json:"n,omitempty"`        // when it ran for a number of calls
	Warmup       string  `json:"warmup"`
	Rate         float64 `json:"rate"` // calls/s in total; 0 is closed loop
	Timeout      string  `json:"timeout"`
	GOMAXPROCS   int     `json:"gomaxprocs"`
}

// writeJSON writes v as indented JSON and a newline.
func writeJSON(w *bytes.Buffer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // maps, strings and numbers: cannot fail
}

// writeTable writes a run's results as a table.
func writeTable(w *bytes.Buffer, p *benchPlan, r *benchReport) {
	s := r.Settings
	fmt.Fprintf(w, "%s: %s, %s, %s; %s\n", s.Scenario, s.Route, s.Codec, payloadText(s), loadText(p, s))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tconns×inflight\tcalls\tcalls/s\terrors\tmean µs\tp50 µs\tp90 µs\tp99 µs\tp99.9 µs\tmax µs\tMB/s\tCPU µs/call")
	name := s.Scenario
	if name == "custom" {
		name = s.Route
	}
	latency := "-\t-\t-\t-\t-\t-" // no call succeeded, so none was timed
	if r.Calls > r.Errors {
		latency = fmt.Sprintf("%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f", r.MeanUS, r.P50US, r.P90US, r.P99US, r.P999US, r.MaxUS)
	}
	fmt.Fprintf(tw, "%s\t%d×%d\t%d\t%.0f\t%d\t%s\t%.2f\t%.2f\n",
		name, s.Connections, s.Inflight, r.Calls, r.CallsPerSec, r.Errors, latency, r.BytesPerSec/1e6, r.CPUPerCallUS)
	tw.Flush()
	writeErrors(w, r.ErrorsBy, r.FirstErrors)
}

// payloadText describes a scenario's request payload.
func payloadText(s benchSettings) string {
	if s.Scenario == "Sum" {
		return "a and b new on every call"
	}
	return fmt.Sprintf("%d-byte payload", s.PayloadBytes)
}

// loadText describes the shape of a run's load.
func loadText(p *benchPlan, s benchSettings) string {
	var b strings.Builder
	if p.calls > 0 {
		fmt.Fprintf(&b, "%d calls", p.calls)
	} else {
		fmt.Fprintf(&b, "%v", p.duration)
	}
	fmt.Fprintf(&b, " after %v warm-up, ", p.warmup)
	if s.Rate > 0 {
		fmt.Fprintf(&b, "open loop at %g calls/s", s.Rate)
	} else {
		b.WriteString("closed loop")
	}
	fmt.Fprintf(&b, ", %v timeout; GOMAXPROCS %d", s.Timeout, s.GOMAXPROCS)
	if p.runs > 1 {
		fmt.Fprintf(&b, "; median of %d interleaved runs by calls/s, errors summed", p.runs)
	}
	return b.String()
}

// writeErrors writes the errors of a run or of a matrix by kind, with an
// example message of each, if there were any.
func writeErrors(w *bytes.Buffer, by map[string]int64, first map[string]string) {
	if len(by) == 0 {
		return
	}
	fmt.Fprintf(w, "errors: %s\n", errorKinds(by))
	for _, k := range sortedKeys(by) {
		if m, ok := first[k]; ok {
			fmt.Fprintf(w, "  first %s: %s\n", k, m)
		}
	}
}

// writeMatrix writes the cells of -matrix seed as one table: a row per
// scenario, a column per number of callers, each cell calls/s and p99.
// Cells not run (an interrupted matrix) show "-".
func writeMatrix(w *bytes.Buffer, p *benchPlan, reports []*benchReport) {
	s := reports[0].Settings
	fmt.Fprintf(w, "matrix seed: calls/s (p99 µs) by callers, each caller on its own connection; %s\n", loadText(p, s))
	type key struct {
		scenario string
		conns    int
	}
	cells := map[key]*benchReport{}
	for _, r := range reports {
		cells[key{r.Settings.Scenario, r.Settings.Connections}] = r
	}
	columns := append(append([]int(nil), seedCallers...), seedThroughputConns)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "scenario")
	for _, n := range columns {
		fmt.Fprintf(tw, "\t%d", n)
	}
	fmt.Fprint(tw, "\terrors\n")
	row := func(label, scenario string, conns []int) {
		fmt.Fprint(tw, label)
		var errs int64
		for _, n := range columns {
			r, ok := cells[key{scenario, n}]
			switch {
			case !slices.Contains(conns, n):
				fmt.Fprint(tw, "\t")
			case !ok:
				fmt.Fprint(tw, "\t-")
			case r.Calls == r.Errors: // none timed
				fmt.Fprintf(tw, "\t%.0f (-)", r.CallsPerSec)
				errs += r.Errors
			default:
				fmt.Fprintf(tw, "\t%.0f (%.0f)", r.CallsPerSec, r.P99US)
				errs += r.Errors
			}
		}
		fmt.Fprintf(tw, "\t%d\n", errs)
	}
	for _, name := range seedScenarios {
		row(name, name, seedCallers)
	}
	for _, name := range seedThroughput {
		row(name+seedThroughputSuffix, name, []int{seedThroughputConns})
	}
	tw.Flush()

	by := map[string]int64{}
	first := map[string]string{}
	for _, r := range reports {
		for k, v := range r.ErrorsBy {
			by[k] += v
		}
		for k, v := range r.FirstErrors {
			if _, ok := first[k]; !ok {
				first[k] = v
			}
		}
	}
	writeErrors(w, by, first)
}

// errorKinds lists error counts by kind: "3 wrong reply, 1 unavailable".
func errorKinds(by map[string]int64) string {
	var parts []string
	for _, k := range sortedKeys(by) {
		parts = append(parts, fmt.Sprintf("%d %s", by[k], k))
	}
	return strings.Join(parts, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// round rounds x to the given number of decimals.
func round(x float64, decimals int) float64 {
	p := math.Pow10(decimals)
	return math.Round(x*p) / p
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	fh, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := fh.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressLine rewrites one line of a terminal with a run's progress:
// update runs on loadgen's progress goroutine, start and end around the run.
type progressLine struct {
	w io.Writer

	mu    sync.Mutex
	label string
	last  loadgen.Progress
	open  bool // accepting updates
	drawn bool // a line is on the screen
}

// start opens the line for a run called label.
func (p *progressLine) start(label string, warmup time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.label, p.last, p.open = label, loadgen.Progress{}, true
	if warmup > 0 {
		fmt.Fprintf(p.w, "\r\x1b[K%s: warming up for %v", label, warmup)
		p.drawn = true
	}
}

// update draws pr.
func (p *progressLine) update(pr loadgen.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.open {
		return
	}
	var rate float64
	if d := (pr.Elapsed - p.last.Elapsed).Seconds(); d > 0 {
		rate = float64(pr.Calls-p.last.Calls) / d
	}
	fmt.Fprintf(p.w, "\r\x1b[K%s: %.0fs  %d calls  %.0f calls/s  %d errors", p.label, pr.Elapsed.Seconds(), pr.Calls, rate, pr.Errors)
	p.last, p.drawn = pr, true
}

// end erases the line and ignores later updates.
func (p *progressLine) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	p.open, p.drawn = false, false
}
