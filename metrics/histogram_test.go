package metrics

import (
	"math"
	"testing"
	"time"
)

// TestBuckets: each bucket holds the durations above the one before's
// bound up to its own, bounds grow by a quarter of a power of two, and the
// powers of two Prometheus gets are bounds.
func TestBuckets(t *testing.T) {
	if got := BucketBound(0); got != 128 {
		t.Fatalf("bound 0: %v", got)
	}
	for i := 0; i < NumBuckets-1; i++ {
		b := int64(BucketBound(i))
		if got := bucketOf(b); got != i {
			t.Fatalf("bucketOf(%d) = %d, want %d (its bound)", b, got, i)
		}
		if got := bucketOf(b + 1); got != i+1 {
			t.Fatalf("bucketOf(%d) = %d, want %d (just past bound %d)", b+1, got, i+1, i)
		}
		if i > 0 {
			prev := int64(BucketBound(i - 1))
			if width := b - prev; width&(width-1) != 0 || width*4 > prev || prev >= width*8 {
				t.Fatalf("bucket %d: (%d, %d] is %d wide; want a quarter of a power of two", i, prev, b, width)
			}
		}
	}
	for _, ns := range []int64{0, 1, 127, 128} {
		if got := bucketOf(ns); got != 0 {
			t.Fatalf("bucketOf(%d) = %d, want 0", ns, got)
		}
	}
	for _, ns := range []int64{1<<maxShift + 1, math.MaxInt64} {
		if got := bucketOf(ns); got != NumBuckets-1 {
			t.Fatalf("bucketOf(%d) = %d, want the last, %d", ns, got, NumBuckets-1)
		}
	}
	if BucketBound(NumBuckets-2) != 1<<maxShift {
		t.Fatalf("the last bounded bucket ends at %v, want 2^%d ns", BucketBound(NumBuckets-2), maxShift)
	}
	for i, s := range promBounds {
		if want := time.Duration(1) << (minShift + i); s != want.Seconds() {
			t.Fatalf("Prometheus bound %d: %v s, want %v", i, s, want)
		}
	}
}

// TestQuantile: percentiles of known durations come within a bucket's
// width of the truth, and an empty histogram answers 0.
func TestQuantile(t *testing.T) {
	var h Histogram
	if h.Quantile(0.5) != 0 {
		t.Fatal("an empty histogram has a median")
	}
	// 1 µs, 2 µs, ..., 10,000 µs.
	for i := 1; i <= 10000; i++ {
		d := time.Duration(i) * time.Microsecond
		h.Counts[bucketOf(int64(d))]++
		h.Sum += d
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{
		{0.5, 5000 * time.Microsecond},
		{0.9, 9000 * time.Microsecond},
		{0.99, 9900 * time.Microsecond},
		{0.01, 100 * time.Microsecond},
	} {
		got := h.Quantile(tc.q)
		if diff := math.Abs(float64(got - tc.want)); diff > float64(tc.want)/4 {
			t.Errorf("q%.2f = %v, want %v within 25%%", tc.q, got, tc.want)
		}
	}
	if got := h.Quantile(1); got < 10*time.Millisecond || got > BucketBound(bucketOf(int64(10*time.Millisecond))) {
		t.Errorf("q1 = %v, want the bucket of 10ms", got)
	}

	earlier := h
	h.Counts[bucketOf(int64(time.Second))] += 10
	h.Sum += 10 * time.Second
	h.Sub(&earlier)
	if h.Count() != 10 || h.Sum != 10*time.Second {
		t.Fatalf("after Sub: %d counted, sum %v", h.Count(), h.Sum)
	}
	if got := h.Quantile(0.5); got < 768*time.Millisecond || got > BucketBound(bucketOf(int64(time.Second))) {
		t.Fatalf("median of ten 1s calls: %v", got)
	}
}
