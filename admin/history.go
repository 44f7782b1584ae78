package admin

import (
	"net/http"
	"strconv"
	"time"
)

// point is what happened between two samples.
type point struct {
	at       time.Time // the later sample's time
	secs     float64   // from the earlier sample to the later
	calls    uint64    // calls that reached a handler and ended
	errors   uint64    // calls answered with an error, both ports
	overruns uint64    // inline handler runs the watchdog caught
	conns    int       // connections open at the later sample
	p50, p99 time.Duration
	timed    bool // some call ended, so p50 and p99 mean something
}

// between returns the point from sample a to the later sample b.
func (h *Handler) between(a, b *sample) point {
	p := point{at: b.at, secs: b.at.Sub(a.at).Seconds(), conns: b.server.Conns}
	_, ea := a.errors()
	_, eb := b.errors()
	p.errors = eb - min(ea, eb)
	p.overruns = b.overruns - min(a.overruns, b.overruns)
	if h.metrics != nil {
		na, la := a.calls()
		nb, lb := b.calls()
		p.calls = nb - min(na, nb)
		lb.Sub(&la)
		if lb.Count() > 0 {
			p.timed = true
			p.p50, p.p99 = lb.Quantile(0.50), lb.Quantile(0.99)
		}
	}
	return p
}

// ring holds the newest points, oldest first, up to its capacity.
type ring struct {
	buf   []point
	start int // the oldest
	n     int
}

func newRing(capacity int) ring { return ring{buf: make([]point, capacity)} }

// push adds p as the newest point, dropping the oldest when full.
func (r *ring) push(p point) {
	if r.n < len(r.buf) {
		r.buf[(r.start+r.n)%len(r.buf)] = p
		r.n++
		return
	}
	r.buf[r.start] = p
	r.start = (r.start + 1) % len(r.buf)
}

// all calls fn with each point, oldest first.
func (r *ring) all(fn func(*point)) {
	for i := range r.n {
		fn(&r.buf[(r.start+i)%len(r.buf)])
	}
}

// History is what /history.json answers: what happened between each
// sample the Handler took and the one before, oldest first, for the
// last Options.History, as columns (the live page's charts take them so).
// Each index of the columns is one sample interval: Time is its end,
// Seconds its length, the rates are over it, and the percentiles of the
// handler time of the calls that ended in it (null when none did).
// Without Options.Metrics, the columns of calls are null.
type History struct {
	Interval float64 `json:"interval_s"` // Options.SampleInterval
	Span     float64 `json:"span_s"`     // Options.History

	Time       []float64  `json:"time"` // Unix seconds, to the millisecond
	Seconds    []float64  `json:"seconds"`
	CallsPerS  []*float64 `json:"calls_per_s"`  // calls that reached a handler and ended
	ErrorsPerS []float64  `json:"errors_per_s"` // calls answered with an error, both ports
	P50        []*float64 `json:"p50_s"`        // handler time
	P99        []*float64 `json:"p99_s"`
	Overruns   []uint64   `json:"overruns"` // inline handler runs that held their loop past the watchdog's threshold
	Conns      []int      `json:"conns"`    // connections open at the end
}

// History returns the points after the Unix time since (seconds; 0 for
// all of them).
func (h *Handler) History(since float64) History {
	out := History{Interval: h.interval.Seconds(), Span: float64(len(h.history.buf)) * h.interval.Seconds()}
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.history.n
	out.Time, out.Seconds, out.ErrorsPerS = make([]float64, 0, n), make([]float64, 0, n), make([]float64, 0, n)
	out.CallsPerS, out.P50, out.P99 = make([]*float64, 0, n), make([]*float64, 0, n), make([]*float64, 0, n)
	out.Overruns, out.Conns = make([]uint64, 0, n), make([]int, 0, n)
	h.history.all(func(p *point) {
		t := unixSeconds(p.at)
		if t <= since {
			return
		}
		out.Time = append(out.Time, t)
		out.Seconds = append(out.Seconds, p.secs)
		perS := func(n uint64) float64 {
			if p.secs <= 0 {
				return 0
			}
			return float64(n) / p.secs
		}
		out.ErrorsPerS = append(out.ErrorsPerS, perS(p.errors))
		out.Overruns = append(out.Overruns, p.overruns)
		out.Conns = append(out.Conns, p.conns)
		var calls, p50, p99 *float64
		if h.metrics != nil {
			calls = ptr(perS(p.calls))
			if p.timed {
				p50, p99 = ptr(p.p50.Seconds()), ptr(p.p99.Seconds())
			}
		}
		out.CallsPerS = append(out.CallsPerS, calls)
		out.P50 = append(out.P50, p50)
		out.P99 = append(out.P99, p99)
	})
	return out
}

func ptr(f float64) *float64 { return &f }

// unixSeconds is t in Unix seconds, to the millisecond, so that a time
// read back from JSON compares equal to the one sent.
func unixSeconds(t time.Time) float64 { return float64(t.UnixMilli()) / 1e3 }

// historyJSON serves History as JSON: all of it, or with ?since=T the
// points after the Unix time T, as a page that has the earlier ones asks.
func (h *Handler) historyJSON(w http.ResponseWriter, r *http.Request) {
	var since float64
	if v := r.URL.Query().Get("since"); v != "" {
		var err error
		if since, err = strconv.ParseFloat(v, 64); err != nil {
			plain(w, http.StatusBadRequest, "since="+strconv.Quote(v)+": want Unix seconds\n")
			return
		}
	}
	h.writeJSON(w, r, h.History(since), false)
}
