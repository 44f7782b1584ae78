// Package promtest reads what Prometheus collectors export, for the tests
// of metrics and metrics/clientmetrics.
package promtest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Gather registers cs with a pedantic Prometheus registry and returns
// every series it exports, as "name label=value ..." (labels in order):
// counters and gauges by value, histograms by count, each with the 31
// buckets from 128 ns to 137 s.
func Gather(t testing.TB, cs ...prometheus.Collector) map[string]float64 {
	t.Helper()
	pr := prometheus.NewPedanticRegistry()
	pr.MustRegister(cs...)
	families, err := pr.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			key := f.GetName()
			for _, l := range mt.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case mt.Counter != nil:
				got[key] = mt.Counter.GetValue()
			case mt.Gauge != nil:
				got[key] = mt.Gauge.GetValue()
			case mt.Histogram != nil:
				got[key] = float64(mt.Histogram.GetSampleCount())
				if n := len(mt.Histogram.GetBucket()); n != 31 {
					t.Errorf("%s: %d buckets, want 31 (128 ns to 137 s)", key, n)
				}
			}
		}
	}
	return got
}
