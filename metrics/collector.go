package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The metrics a Metrics exports; docs/operating.md explains each.
var (
	callsDesc = prometheus.NewDesc("rpcd_calls_total",
		"Calls that reached a handler, by route and by the code they ended with (OK for success).",
		[]string{"route", "code"}, nil)
	inFlightDesc = prometheus.NewDesc("rpcd_calls_in_flight",
		"Calls running in a handler now, by route.",
		[]string{"route"}, nil)
	durationDesc = prometheus.NewDesc("rpcd_call_duration_seconds",
		"Time from a call's handler (and the middleware inside the metrics one) starting to its returning, by route.",
		[]string{"route"}, nil)
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
	ch <- callsDesc
	ch <- inFlightDesc
	ch <- durationDesc
}

// Collect implements prometheus.Collector: it reads every route's counters
// once per scrape. A route's calls are exported by code for each code it
// has ended with, OK always.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, s := range m.Snapshot() {
		for slot, n := range s.Calls {
			if n > 0 || slot == 0 {
				ch <- prometheus.MustNewConstMetric(callsDesc, prometheus.CounterValue, float64(n), s.Route, CodeName(slot))
			}
		}
		ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(s.InFlight), s.Route)
		buckets := make(map[float64]uint64, len(promBounds))
		var cum uint64
		for i, c := range s.Latency.Counts[:NumBuckets-1] {
			cum += c
			if i%subBuckets == 0 {
				buckets[promBounds[i/subBuckets]] = cum
			}
		}
		ch <- prometheus.MustNewConstHistogram(durationDesc, s.Latency.Count(), s.Latency.Sum.Seconds(), buckets, s.Route)
	}
}
