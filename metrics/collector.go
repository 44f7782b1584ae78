package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// descs are the metrics a Metrics exports: a server's (New) or a client's
// (NewClient); docs/operating.md explains each.
type descs struct {
	calls, inFlight, duration *prometheus.Desc
}

var (
	serverDescs = descs{
		calls: prometheus.NewDesc("rpcd_calls_total",
			"Calls that reached a handler, by route and by the code they ended with (OK for success).",
			[]string{"route", "code"}, nil),
		inFlight: prometheus.NewDesc("rpcd_calls_in_flight",
			"Calls running in a handler now, by route.",
			[]string{"route"}, nil),
		duration: prometheus.NewDesc("rpcd_call_duration_seconds",
			"Time from a call's handler (and the middleware inside the metrics one) starting to its returning, by route.",
			[]string{"route"}, nil),
	}
	clientDescs = descs{
		calls: prometheus.NewDesc("rpcd_client_calls_total",
			"Calls this client sent, by route and by the code they ended with (OK for success), retries within one call counted once.",
			[]string{"route", "code"}, nil),
		inFlight: prometheus.NewDesc("rpcd_client_calls_in_flight",
			"Calls this client has sent and waits for, by route.",
			[]string{"route"}, nil),
		duration: prometheus.NewDesc("rpcd_client_call_duration_seconds",
			"Time from a call's start in the client (inside the interceptors before the metrics one) to its end, retries included, by route.",
			[]string{"route"}, nil),
	}
)

// promBounds are the histogram bounds Prometheus gets, in seconds: every
// fourth bound of the buckets counted, the powers of two from 2^minShift
// ns (128 ns) to 2^maxShift ns (137 s), so that each count is exact.
var promBounds = func() []float64 {
	var b []float64
	for i := 0; i < NumBuckets-1; i += subBuckets {
		b = append(b, BucketBound(i).Seconds())
	}
	return b
}()

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.descs.calls
	ch <- m.descs.inFlight
	ch <- m.descs.duration
}

// Collect implements prometheus.Collector: it reads every route's counters
// once per scrape. A route's calls are exported by code for each code it
// has ended with, OK always.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, s := range m.Snapshot() {
		for slot, n := range s.Calls {
			if n > 0 || slot == 0 {
				ch <- prometheus.MustNewConstMetric(m.descs.calls, prometheus.CounterValue, float64(n), s.Route, CodeName(slot))
			}
		}
		ch <- prometheus.MustNewConstMetric(m.descs.inFlight, prometheus.GaugeValue, float64(s.InFlight), s.Route)
		buckets := make(map[float64]uint64, len(promBounds))
		var cum uint64
		for i, c := range s.Latency.Counts[:NumBuckets-1] {
			cum += c
			if i%subBuckets == 0 {
				buckets[promBounds[i/subBuckets]] = cum
			}
		}
		ch <- prometheus.MustNewConstHistogram(m.descs.duration, s.Latency.Count(), s.Latency.Sum.Seconds(), buckets, s.Route)
	}
}
