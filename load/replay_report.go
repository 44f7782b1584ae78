package load

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"runtime"
	"text/tabwriter"
	"time"
)

// ReplayReport is the part of a Report that only a replay has (Replay):
// what was replayed, how fast, and what the answers were against the
// recorded ones.
type ReplayReport struct {
	Recording     string  `json:"recording"`           // Recording.Name
	CutShort      bool    `json:"cut_short,omitempty"` // Recording.CutShort
	RecordedCalls int     `json:"recorded_calls"`      // calls in the recording
	RecordedSec   float64 `json:"recorded_sec"`        // one play's span (Recording.Length)
	RecordedRate  float64 `json:"recorded_rate"`       // calls/s as recorded
	Speed         float64 `json:"speed"`
	Loops         int     `json:"loops"` // plays asked for; 0: until Duration
	// AskedRate is the recorded rate × Speed; ReachedRate the calls made
	// over the time it took to make them (at least the schedule's span):
	// the Report's CallsPerSec.
	AskedRate   float64 `json:"asked_rate"`
	ReachedRate float64 `json:"reached_rate"`
	FellBehind  bool    `json:"fell_behind"` // ReachedRate under 95 % of AskedRate
	// How long after their due times calls were sent: the pacer's tick,
	// and any time this process fell behind.
	LateMeanUS float64          `json:"late_mean_us"`
	LateMaxUS  float64          `json:"late_max_us"`
	Sent       map[string]int64 `json:"sent"`              // calls made, by kind: "Request", "OneWay", "Publish"
	Routes     map[string]int64 `json:"routes"`            // calls made, by route (a Publish's topic)
	Skipped    map[string]int64 `json:"skipped,omitempty"` // frames of the recording not replayed, by kind
	Compare    *CompareReport   `json:"compare,omitempty"` // with ReplayConfig.Compare
}

// report sums what the replay made.
func (r *replayRun) report(cpu time.Duration) *Report {
	cfg, rec := r.cfg, r.cfg.Recording
	rr := &ReplayReport{
		Recording:     rec.Name,
		CutShort:      rec.CutShort,
		RecordedCalls: len(rec.Calls),
		RecordedSec:   round(r.length.Seconds(), 3),
		RecordedRate:  round(float64(len(rec.Calls))/r.length.Seconds(), 1),
		Speed:         cfg.Speed,
		Loops:         cfg.Loops,
		Sent:          map[string]int64{},
		Routes:        map[string]int64{},
		Skipped:       rec.Skipped,
	}
	if rr.Loops == 0 && cfg.Duration == 0 {
		rr.Loops = 1
	}
	asked := float64(len(rec.Calls)) / r.length.Seconds() * cfg.Speed
	rr.AskedRate = round(asked, 1)

	// The time the calls took to make: the schedule's span, or longer if
	// the last call went out late; until the stop, if cut short.
	span := time.Duration(float64(r.length) * float64(r.loops) / cfg.Speed)
	if r.loops == math.MaxInt || span < 0 {
		span = cfg.Duration
	}
	if r.end > 0 {
		span = min(span, r.end)
	}
	var made int64
	var lateSum, lastSent time.Duration
	first := map[string]string{}
	for _, c := range r.conns {
		for k, n := range c.sent {
			rr.Sent[k] += n
			made += n
		}
		for k, n := range c.routes {
			rr.Routes[k] += n
		}
		lateSum += c.late
		lastSent = max(lastSent, c.lastSent)
		rr.LateMaxUS = max(rr.LateMaxUS, float64(c.maxLate.Nanoseconds())/1e3)
		c.mu.Lock()
		c.tally.Flush()
		for k, m := range c.first {
			if _, ok := first[k]; !ok {
				first[k] = m
			}
		}
		c.mu.Unlock()
	}
	if made > 0 {
		rr.LateMeanUS = round(float64(lateSum.Nanoseconds())/1e3/float64(made), 1)
	}
	elapsed := max(span, lastSent)
	if r.cut.Load() {
		elapsed = r.cutAt
	}
	res := r.rec.Result(elapsed, cpu)
	if elapsed > 0 {
		rr.ReachedRate = round(float64(made)/elapsed.Seconds(), 1)
	}
	rr.FellBehind = rr.ReachedRate < rateReachedShare*asked
	if r.cmp != nil {
		rr.Compare = r.cmp.report()
	}

	var payload int
	for i := range rec.Calls {
		payload += len(rec.Calls[i].Payload)
	}
	rep := resultReport(res, first)
	rep.CallsPerSec, rep.Replay = rr.ReachedRate, rr
	rep.Settings = Settings{
		Scenario:     ReplayName,
		PayloadBytes: payload / len(rec.Calls),
		Compress:     compressionName(cfg.Client),
		Addr:         cfg.Addr,
		Server:       "external",
		Connections:  len(r.conns),
		Warmup:       "0s",
		Rate:         rr.AskedRate,
		Timeout:      cfg.Timeout.String(),
		GOMAXPROCS:   runtime.GOMAXPROCS(0),
	}
	rep.Settings.Duration = span.String() // the schedule's: the plays at Speed, or Duration
	reached := !rr.FellBehind
	rep.RateReached = &reached
	if rr.FellBehind {
		rep.RateShortfall = fmt.Sprintf("the replay fell behind: %.0f calls/s of the %.0f asked (%.0f%%, the recorded %.0f × speed %g);"+
			" calls went out %s after they were due on average, %s at most: this process could not send them on time (GOMAXPROCS %d, %.1f µs of its CPU a call), or the connections' writes waited for the server to read.",
			rr.ReachedRate, asked, 100*rr.ReachedRate/asked, rr.RecordedRate, cfg.Speed,
			usText(rr.LateMeanUS/1e6), usText(rr.LateMaxUS/1e6), runtime.GOMAXPROCS(0), rep.CPUPerCallUS)
	}
	if rep.ErrorsBy == nil {
		rep.ErrorsBy = map[string]int64{}
	}
	if len(rep.FirstErrors) == 0 {
		rep.FirstErrors = nil
	}
	return rep
}

// ReplayName is what a replay's Report gives as its scenario.
const ReplayName = "replay"

// sumValues returns the sum of m's values.
func sumValues(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// writeReplayText writes r, a replay's report, as rpcd bench -replay
// prints it: what was replayed, the row of figures every bench run has,
// the rate reached against the rate asked, the calls by route, what was
// skipped, the errors and the comparison.
func (r *Report) writeReplayText(w io.Writer) error {
	var b bytes.Buffer
	s, rr := r.Settings, r.Replay
	loops := fmt.Sprintf("played %d times", rr.Loops)
	switch {
	case rr.Loops == 0:
		loops = "played again and again for " + s.Duration
	case rr.Loops == 1:
		loops = "played once"
	}
	if rr.Loops > 0 && s.Duration != "" {
		loops += " (" + s.Duration + ")"
	}
	conns := fmt.Sprintf("%d connections", s.Connections)
	if s.Connections == 1 {
		conns = "1 connection"
	}
	fmt.Fprintf(&b, "replay: %s, %d calls over %s in %gs recorded (%.0f calls/s); speed %g, %s; open loop, %s timeout for calls recorded without a deadline; GOMAXPROCS %d\n",
		rr.Recording, rr.RecordedCalls, conns, rr.RecordedSec, rr.RecordedRate, rr.Speed, loops, s.Timeout, s.GOMAXPROCS)
	if rr.CutShort {
		b.WriteString("the recording ends without its end record (its recorder stopped short): replayed as far as it goes\n")
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tconns\tcalls\tcalls/s\terrors\tmean µs\tp50 µs\tp90 µs\tp99 µs\tp99.9 µs\tmax µs\tMB/s\tCPU µs/call\tserver CPU µs/call")
	fmt.Fprintf(tw, "%s\t%d\t%s\n", ReplayName, s.Connections, r.figures())
	tw.Flush()
	fmt.Fprintf(&b, "rate: %.0f calls/s reached of %.0f asked (%.1f%%); calls went out %s after they were due on average, %s at most\n",
		rr.ReachedRate, rr.AskedRate, 100*rr.ReachedRate/rr.AskedRate, usText(rr.LateMeanUS/1e6), usText(rr.LateMaxUS/1e6))
	if rr.FellBehind {
		b.WriteString("fell behind: the replay made under 95% of the rate asked\n")
	}
	fmt.Fprintf(&b, "made: %s\n", countsText(rr.Sent, -1))
	fmt.Fprintf(&b, "routes: %s\n", countsText(rr.Routes, sumValues(rr.Routes)))
	if len(rr.Skipped) > 0 {
		fmt.Fprintf(&b, "skipped, not replayed: %s\n", countsText(rr.Skipped, -1))
	}
	writeErrors(&b, r.ErrorsBy, r.FirstErrors)
	if rr.Compare != nil {
		rr.Compare.writeText(&b)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// countsText lists counts by name, most first: "2400 Orders/Put (60.0%),
// ..." with total positive, without shares otherwise.
func countsText(m map[string]int64, total int64) string {
	keys := sortedKeys(m)
	sortByCount(keys, m)
	var b bytes.Buffer
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d %s", m[k], k)
		if total > 0 {
			fmt.Fprintf(&b, " (%.1f%%)", 100*float64(m[k])/float64(total))
		}
	}
	if len(keys) == 0 {
		b.WriteString("none")
	}
	return b.String()
}
