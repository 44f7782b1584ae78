package load

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/rpcd/rpcd/internal/loadgen"
)

// Report is what Bench measured of one run, with the field names of rpcd
// bench -json.
type Report struct {
	Calls        int64             `json:"calls"`
	Errors       int64             `json:"errors"`
	ErrorsBy     map[string]int64  `json:"errors_by"`              // by kind: "wrong reply", or an rpcd code; never null
	FirstErrors  map[string]string `json:"first_errors,omitempty"` // an example message per kind
	ElapsedSec   float64           `json:"elapsed_sec"`
	CallsPerSec  float64           `json:"calls_per_sec"`
	BytesPerSec  float64           `json:"bytes_per_sec"` // request and reply payloads
	MeanUS       float64           `json:"mean_us"`       // latency, µs from send to reply
	P50US        float64           `json:"p50_us"`
	P90US        float64           `json:"p90_us"`
	P99US        float64           `json:"p99_us"`
	P999US       float64           `json:"p999_us"`
	MaxUS        float64           `json:"max_us"`
	CPUPerCallUS float64           `json:"cpu_per_call_us"` // this process's user+system CPU per call: the load generator's share
	// ServerCPUPerCallUS is the server's CPU per call over the same
	// window, where Config.ServerCPU could read it (rpcd bench reads the
	// server's builtin.Stats).
	ServerCPUPerCallUS float64 `json:"server_cpu_per_call_us,omitempty"`
	// With a Rate: whether calls/s came to 95 % of it, and if not, what
	// held it back.
	RateReached   *bool    `json:"rate_reached,omitempty"`
	RateShortfall string   `json:"rate_shortfall,omitempty"`
	Runs          int      `json:"runs"` // the median of this many (Median); errors are their sum
	Settings      Settings `json:"settings"`
	// Replay is what a replay (Replay) replayed, at what rate, and how
	// its answers compared; nil for other runs. A replay's Calls are
	// every call made, its latencies those of its Requests, from when each
	// was due.
	Replay *ReplayReport `json:"replay,omitempty"`
}

// Settings is how a run was made.
type Settings struct {
	Scenario     string  `json:"scenario"` // "custom" for RawRoute's and JSONRoute's
	Route        string  `json:"route"`
	Codec        string  `json:"codec"`              // "json" or "raw"
	Compress     string  `json:"compress,omitempty"` // what the clients asked for (rpcd bench -compress, when given)
	PayloadBytes int     `json:"payload_bytes"`      // request payload, encoded; Sum's varies
	Addr         string  `json:"addr"`
	Server       string  `json:"server"` // "external", or "child": a server rpcd bench started
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

// WriteText writes r as rpcd bench's table: a line of what was run, a row
// of figures, and the errors by kind with the first message of each.
// runs is the number of interleaved runs asked for, r being the median of
// those made (Median); past 1, the first line says so.
func (r *Report) WriteText(w io.Writer, runs int) error {
	if r.Replay != nil {
		return r.writeReplayText(w)
	}
	var b bytes.Buffer
	s := r.Settings
	fmt.Fprintf(&b, "%s: %s, %s, %s; %s\n", s.Scenario, s.Route, s.Codec, payloadText(s), loadText(s, runs))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tconns×inflight\tcalls\tcalls/s\terrors\tmean µs\tp50 µs\tp90 µs\tp99 µs\tp99.9 µs\tmax µs\tMB/s\tCPU µs/call\tserver CPU µs/call")
	name := s.Scenario
	if name == "custom" {
		name = s.Route
	}
	fmt.Fprintf(tw, "%s\t%d×%d\t%s\n", name, s.Connections, s.Inflight, r.figures())
	tw.Flush()
	writeErrors(&b, r.ErrorsBy, r.FirstErrors)
	_, err := w.Write(b.Bytes())
	return err
}

// figures returns the columns of r's row from calls on, tab-separated.
func (r *Report) figures() string {
	latency := "-\t-\t-\t-\t-\t-" // no call succeeded, so none was timed
	timed := r.Calls > r.Errors
	if r.Replay != nil {
		timed = r.P50US > 0 // its one-way calls have no latency
	}
	if timed {
		latency = fmt.Sprintf("%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f", r.MeanUS, r.P50US, r.P90US, r.P99US, r.P999US, r.MaxUS)
	}
	server := "-" // not known
	if r.ServerCPUPerCallUS > 0 {
		server = fmt.Sprintf("%.2f", r.ServerCPUPerCallUS)
	}
	return fmt.Sprintf("%d\t%.0f\t%d\t%s\t%.2f\t%.2f\t%s",
		r.Calls, r.CallsPerSec, r.Errors, latency, r.BytesPerSec/1e6, r.CPUPerCallUS, server)
}

// payloadText describes a scenario's request payload.
func payloadText(s Settings) string {
	if s.Scenario == "Sum" {
		return "a and b new on every call"
	}
	return fmt.Sprintf("%d-byte payload", s.PayloadBytes)
}

// loadText describes the shape of a run's load, made the median of runs
// interleaved runs.
func loadText(s Settings, runs int) string {
	var b strings.Builder
	if s.N > 0 {
		fmt.Fprintf(&b, "%d calls", s.N)
	} else {
		b.WriteString(s.Duration)
	}
	fmt.Fprintf(&b, " after %s warm-up, ", s.Warmup)
	if s.Rate > 0 {
		fmt.Fprintf(&b, "open loop at %g calls/s", s.Rate)
	} else {
		b.WriteString("closed loop")
	}
	fmt.Fprintf(&b, ", %s timeout; GOMAXPROCS %d", s.Timeout, s.GOMAXPROCS)
	if runs > 1 {
		fmt.Fprintf(&b, "; median of %d interleaved runs by calls/s, errors summed", runs)
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

// errorKinds lists error counts by kind: "3 wrong reply, 1 unavailable".
func errorKinds(by map[string]int64) string {
	var parts []string
	for _, k := range sortedKeys(by) {
		parts = append(parts, fmt.Sprintf("%d %s", by[k], k))
	}
	return strings.Join(parts, ", ")
}

// sortByCount sorts keys by their counts in m, most first, stably.
func sortByCount(keys []string, m map[string]int64) {
	slices.SortStableFunc(keys, func(a, b string) int { return cmp.Compare(m[b], m[a]) })
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// resultReport returns the report of res, a measured window's figures,
// with first, the first error of each kind; the caller adds the settings.
func resultReport(res loadgen.Result, first map[string]string) *Report {
	return &Report{
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
		FirstErrors:  first,
	}
}

// round rounds x to the given number of decimals.
func round(x float64, decimals int) float64 {
	p := math.Pow10(decimals)
	return math.Round(x*p) / p
}
