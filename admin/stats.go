package admin

import (
	"net/http"
	"runtime"
	"time"

	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/metrics"
	"github.com/rpcd/rpcd/reactor"
)

// sample is the counters read at one time.
type sample struct {
	at       time.Time
	server   reactor.Stats
	gwErrors [transport.CodeSlots]uint64 // the gateway's calls answered with an error
	overruns uint64                      // inline overruns, all routes
	routes   []metrics.RouteStats
}

// errors returns the calls answered with an error by code, on the RPC
// port and through the gateway, and their total.
func (s *sample) errors() (byCode [transport.CodeSlots]uint64, total uint64) {
	for slot := range byCode {
		byCode[slot] = s.server.Errors[slot] + s.gwErrors[slot]
		total += byCode[slot]
	}
	return byCode, total
}

// calls returns the calls ended in all routes, and their latencies.
func (s *sample) calls() (n uint64, latency metrics.Histogram) {
	for i := range s.routes {
		n += s.routes[i].Total()
		latency.Add(&s.routes[i].Latency)
	}
	return n, latency
}

// take reads the counters now.
func (h *Handler) take(now time.Time) sample {
	s := sample{at: now, server: h.srv.Stats()}
	if h.gw != nil {
		s.gwErrors = h.gw.Stats().Errors
	}
	for _, r := range inlineRoutes(h.srv) {
		s.overruns += r.Overruns
	}
	if h.metrics != nil {
		s.routes = h.metrics.Snapshot()
	}
	return s
}

// sampleEvery samples the counters every interval until Close.
func (h *Handler) sampleEvery() {
	defer close(h.done)
	t := time.NewTicker(h.interval)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
			h.sample(time.Now())
		}
	}
}

// sample takes a sample: the history gets the point between it and the
// one before, and the samples no longer needed as bases are dropped.
func (h *Handler) sample(now time.Time) {
	s := h.take(now)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.history.push(h.between(&h.recent[len(h.recent)-1], &s))
	h.recent = append(h.recent, s)
	// Keep one sample at least latencyWindow old, and those after it.
	for len(h.recent) > 1 && now.Sub(h.recent[1].at) >= h.latencyWindow {
		h.recent[0] = sample{}
		h.recent = h.recent[1:]
	}
}

// now reads the counters and returns them with the samples to compare
// them with for rates and for percentiles: the newest at least rateWindow
// old, and at least latencyWindow old, or the oldest there is.
func (h *Handler) now() (now, rateBase, latBase sample) {
	now = h.take(time.Now())
	h.mu.Lock()
	defer h.mu.Unlock()
	rateBase, latBase = h.recent[0], h.recent[0]
	for _, s := range h.recent {
		age := now.at.Sub(s.at)
		if age >= h.rateWindow {
			rateBase = s
		}
		if age >= h.latencyWindow {
			latBase = s
		}
	}
	return now, rateBase, latBase
}

// Stats is what /stats.json answers: the figures of the live page's
// tiles and tables. Durations are in seconds; "_per_s" figures are rates
// over RateWindow, percentiles over LatencyWindow: from the newest sample
// at least one sample interval old (ten for percentiles) to now.
type Stats struct {
	Time          time.Time `json:"time"`
	Addr          string    `json:"addr"`
	Ready         bool      `json:"ready"`
	Draining      bool      `json:"draining"`
	Goroutines    int       `json:"goroutines"`
	Version       string    `json:"version"`    // the rpcd module's, as rpcd_build_info labels it
	Revision      string    `json:"revision"`   // of its source
	GoVersion     string    `json:"go_version"` // the Go release that built the binary
	RateWindow    float64   `json:"rate_window_s"`
	LatencyWindow float64   `json:"latency_window_s"`

	Conns         int     `json:"conns"`
	ConnsOpened   uint64  `json:"conns_opened"`
	BytesIn       uint64  `json:"bytes_in"`
	BytesOut      uint64  `json:"bytes_out"`
	BytesInPerS   float64 `json:"bytes_in_per_s"`
	BytesOutPerS  float64 `json:"bytes_out_per_s"`
	SlowConsumers uint64  `json:"slow_consumers"`
	Blocking      int     `json:"blocking"`

	// Calls answered with an error, all codes, handlers' and refusals',
	// on the RPC port and through the gateway (Options.Gateway).
	Errors       uint64            `json:"errors"`
	ErrorsPerS   float64           `json:"errors_per_s"`
	ErrorsByCode map[string]uint64 `json:"errors_by_code"`

	// InlineOverruns counts the inline handler runs that held their event
	// loop past the watchdog's threshold, all routes together; Inline
	// lists the routes with any, or that moved to the blocking pool.
	InlineOverruns uint64        `json:"inline_overruns"`
	Inline         []InlineStats `json:"inline"`

	// The calls that reached a handler, from Options.Metrics; absent
	// without it.
	Calls *CallStats `json:"calls,omitempty"`
}

// InlineStats is what the watchdog saw of one inline route.
type InlineStats struct {
	Route    string `json:"route"`
	Overruns uint64 `json:"overruns"` // runs past the watchdog's threshold
	Moved    bool   `json:"moved"`    // moved itself to the blocking pool
}

// CallStats are the figures of the calls that reached a handler: all
// routes together, and each. The percentiles are of handler time: from
// the handler (and the middleware inside the metrics one) being called to
// its returning, not a round trip.
type CallStats struct {
	RouteStats
	Routes []RouteStats `json:"routes"`
}

// RouteStats are one route's figures, or all routes' together.
type RouteStats struct {
	Route    string  `json:"route,omitempty"`
	Calls    uint64  `json:"calls"`  // ended, since the start
	Errors   uint64  `json:"errors"` // of Calls, those that ended with an error
	InFlight uint64  `json:"in_flight"`
	PerS     float64 `json:"calls_per_s"`
	Count    uint64  `json:"window_calls"` // calls ended within the latency window
	P50      float64 `json:"p50_s"`        // handler time
	P90      float64 `json:"p90_s"`
	P99      float64 `json:"p99_s"`
}

// Stats returns the figures /stats.json answers.
func (h *Handler) Stats() Stats {
	now, rateBase, latBase := h.now()
	perS := func(n, base uint64) float64 {
		d := now.at.Sub(rateBase.at).Seconds()
		if d <= 0 || n < base {
			return 0
		}
		return float64(n-base) / d
	}
	sv, rb := &now.server, &rateBase.server
	out := Stats{
		Time:          now.at,
		Ready:         h.srv.Ready(),
		Draining:      sv.Draining,
		Goroutines:    runtime.NumGoroutine(),
		Version:       h.build.Version,
		Revision:      h.build.Revision,
		GoVersion:     h.build.GoVersion,
		RateWindow:    now.at.Sub(rateBase.at).Seconds(),
		LatencyWindow: now.at.Sub(latBase.at).Seconds(),
		Conns:         sv.Conns,
		ConnsOpened:   sv.ConnsOpened,
		BytesIn:       sv.BytesIn,
		BytesOut:      sv.BytesOut,
		BytesInPerS:   perS(sv.BytesIn, rb.BytesIn),
		BytesOutPerS:  perS(sv.BytesOut, rb.BytesOut),
		SlowConsumers: sv.SlowConsumers,
		Blocking:      sv.Blocking,
		ErrorsByCode:  map[string]uint64{},
	}
	if a := h.srv.Addr(); a != nil {
		out.Addr = a.String()
	}
	byCode, total := now.errors()
	_, baseErrors := rateBase.errors()
	out.Errors = total
	for slot, n := range byCode {
		if n > 0 {
			out.ErrorsByCode[metrics.CodeName(slot)] = n
		}
	}
	out.ErrorsPerS = perS(out.Errors, baseErrors)
	out.Inline = []InlineStats{}
	for _, r := range inlineRoutes(h.srv) {
		out.InlineOverruns += r.Overruns
		if r.Overruns > 0 || r.Moved {
			out.Inline = append(out.Inline, InlineStats{Route: r.Name, Overruns: r.Overruns, Moved: r.Moved})
		}
	}
	if h.metrics == nil {
		return out
	}

	cs := &CallStats{Routes: make([]RouteStats, 0, len(now.routes))}
	var all metrics.Histogram
	var allBase uint64
	for i := range now.routes {
		r := &now.routes[i]
		win := r.Latency
		if b := find(latBase.routes, r.Route); b != nil {
			win.Sub(&b.Latency)
		}
		var base uint64
		if b := find(rateBase.routes, r.Route); b != nil {
			base = b.Total()
		}
		rs := RouteStats{
			Route:    r.Route,
			Calls:    r.Total(),
			Errors:   r.Errors(),
			InFlight: r.InFlight,
			PerS:     perS(r.Total(), base),
		}
		rs.percentiles(&win)
		cs.Routes = append(cs.Routes, rs)
		cs.Calls += rs.Calls
		cs.Errors += rs.Errors
		cs.InFlight += rs.InFlight
		allBase += base
		all.Add(&win)
	}
	cs.PerS = perS(cs.Calls, allBase)
	cs.percentiles(&all)
	out.Calls = cs
	return out
}

func (rs *RouteStats) percentiles(h *metrics.Histogram) {
	rs.Count = h.Count()
	rs.P50 = h.Quantile(0.50).Seconds()
	rs.P90 = h.Quantile(0.90).Seconds()
	rs.P99 = h.Quantile(0.99).Seconds()
}

// find returns the route named name in rs (sorted by name), or nil.
func find(rs []metrics.RouteStats, name string) *metrics.RouteStats {
	for i := range rs {
		if rs[i].Route == name {
			return &rs[i]
		}
	}
	return nil
}

// statsJSON serves Stats as JSON.
func (h *Handler) statsJSON(w http.ResponseWriter, r *http.Request) {
	h.writeJSON(w, r, h.Stats(), true)
}
