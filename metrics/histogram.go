package metrics

import (
	"math"
	"math/bits"
	"time"
)

// The latency buckets: bucket 0 holds durations up to 2^minShift ns; then
// each power of two from there to 2^maxShift ns is cut into four buckets of
// equal width; the last bucket holds everything above 2^maxShift ns. Every
// bucket's bound is inclusive, as Prometheus's "le" is.
const (
	minShift   = 7  // 128 ns
	maxShift   = 37 // about 137 s
	subBuckets = 4

	// NumBuckets is the number of latency buckets a Histogram has.
	NumBuckets = 1 + (maxShift-minShift)*subBuckets + 1
)

// bucketOf returns the bucket that counts a duration of ns nanoseconds:
// the first whose bound is at least ns.
func bucketOf(ns int64) int {
	if ns <= 1<<minShift {
		return 0
	}
	v := uint64(ns - 1)    // bucket i holds (bound(i-1), bound(i)]; v in [2^o, 2^(o+1))
	o := bits.Len64(v) - 1 // o >= minShift
	if o >= maxShift {
		return NumBuckets - 1
	}
	sub := int(v>>(o-2)) & (subBuckets - 1)
	return 1 + (o-minShift)*subBuckets + sub
}

// BucketBound returns the inclusive upper bound of bucket i: +Inf for the
// last.
func BucketBound(i int) time.Duration {
	switch {
	case i <= 0:
		return 1 << minShift
	case i >= NumBuckets-1:
		return math.MaxInt64
	}
	o := minShift + (i-1)/subBuckets
	sub := (i - 1) % subBuckets
	return time.Duration(1) << (o - 2) * time.Duration(subBuckets+sub+1)
}

// Histogram is a snapshot of a latency histogram: how many calls took a
// time within each bucket's bounds, and their total time.
type Histogram struct {
	Counts [NumBuckets]uint64
	Sum    time.Duration
}

// Count returns the number of durations counted.
func (h *Histogram) Count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// Sub subtracts an earlier snapshot of the same histogram from h, leaving
// what was counted between the two.
func (h *Histogram) Sub(earlier *Histogram) {
	for i := range h.Counts {
		h.Counts[i] -= min(h.Counts[i], earlier.Counts[i])
	}
	h.Sum -= min(h.Sum, earlier.Sum)
}

// Add adds another histogram's counts to h.
func (h *Histogram) Add(other *Histogram) {
	for i := range h.Counts {
		h.Counts[i] += other.Counts[i]
	}
	h.Sum += other.Sum
}

// Quantile returns an estimate of the q-quantile (0 <= q <= 1) of the
// durations counted, interpolating within the bucket it falls in (so the
// estimate is off by at most a quarter of a power of two), or 0 when
// nothing was counted. A quantile in the last bucket is reported as that
// bucket's lower bound.
func (h *Histogram) Quantile(q float64) time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	rank := min(max(q, 0), 1) * float64(n)
	var below uint64
	for i, c := range h.Counts {
		if c == 0 || float64(below+c) < rank {
			below += c
			continue
		}
		lo := time.Duration(0)
		if i > 0 {
			lo = BucketBound(i - 1)
		}
		if i == NumBuckets-1 {
			return lo
		}
		hi := BucketBound(i)
		frac := (rank - float64(below)) / float64(c)
		return lo + time.Duration(frac*float64(hi-lo))
	}
	return BucketBound(NumBuckets - 2)
}
