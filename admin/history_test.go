package admin_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/rpcd/rpcd/admin"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/reactor"
)

// getHistory reads /history.json with query.
func getHistory(t *testing.T, base, query string) admin.History {
	t.Helper()
	code, body := get(t, base+"/history.json"+query)
	var h admin.History
	if err := json.Unmarshal([]byte(body), &h); code != http.StatusOK || err != nil {
		t.Fatalf("/history.json%s: %d %v\n%s", query, code, err, body)
	}
	return h
}

// waitAfter waits until the handler has a point taken after t.
func waitAfter(t *testing.T, r *rig, after time.Time) admin.History {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h := r.h.History(0)
		if n := len(h.Time); n > 0 && h.Time[n-1] > float64(after.UnixMilli())/1e3 {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("no point after %v within 10 s", after)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitPoints waits until the handler has more than n points.
func waitPoints(t *testing.T, r *rig, n int) admin.History {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h := r.h.History(0)
		if len(h.Time) > n {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d points after 10 s, want more than %d", len(h.Time), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHistory: the handler samples on its own, from New, and /history.json
// has what happened between samples, as columns of equal length: the
// calls, errors and stalls of each interval add up to those made, the
// handler time is there where calls ended and null where none did, since=
// gives the newer points only, and the ring keeps Options.History.
func TestHistory(t *testing.T) {
	reg := testRoutes()
	stuckRoute(reg, 60*time.Millisecond)
	const interval = 50 * time.Millisecond
	r := newRigAdmin(t, reg, reactor.Options{InlineThreshold: 20 * time.Millisecond},
		admin.Options{SampleInterval: interval, History: 40 * interval})
	c := r.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// A quiet interval first: no calls, so no handler time.
	start := waitPoints(t, r, 0)
	const echoes, denied = 120, 7
	for range echoes {
		if _, err := c.CallRaw(ctx, builtin.EchoPacket, []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	for range denied {
		c.CallRaw(ctx, "Test/Denied", nil, nil)
	}
	r.overrun(t, c, "Test/Stuck", 1)
	mark := waitAfter(t, r, time.Now()) // a sample after them all
	h := getHistory(t, r.admin, "")
	n := len(h.Time)
	for name, l := range map[string]int{"seconds": len(h.Seconds), "calls_per_s": len(h.CallsPerS), "errors_per_s": len(h.ErrorsPerS),
		"p50_s": len(h.P50), "p99_s": len(h.P99), "overruns": len(h.Overruns), "conns": len(h.Conns)} {
		if l != n {
			t.Fatalf("%d times but %d %s", n, l, name)
		}
	}
	if h.Interval != interval.Seconds() || h.Span != 40*interval.Seconds() || n < len(mark.Time) {
		t.Fatalf("interval %v s, span %v s, %d points (the handler had %d)", h.Interval, h.Span, n, len(mark.Time))
	}
	var calls, errs, stalls float64
	for i := range n {
		if i > 0 && h.Time[i] <= h.Time[i-1] {
			t.Errorf("point %d at %v, after %v", i, h.Time[i], h.Time[i-1])
		}
		if h.Seconds[i] <= 0 || h.Seconds[i] > 20*interval.Seconds() {
			t.Errorf("point %d covers %v s, samples being %v apart", i, h.Seconds[i], interval)
		}
		if h.CallsPerS[i] == nil {
			t.Fatalf("point %d has no calls/s, with Metrics", i)
		}
		calls += *h.CallsPerS[i] * h.Seconds[i]
		errs += h.ErrorsPerS[i] * h.Seconds[i]
		stalls += float64(h.Overruns[i])
		ended := *h.CallsPerS[i] * h.Seconds[i]
		if (h.P50[i] != nil) != (ended > 0.5) || (h.P99[i] != nil) != (ended > 0.5) {
			t.Errorf("point %d: %.0f calls ended, p50 %v, p99 %v: want them exactly when calls ended", i, ended, h.P50[i], h.P99[i])
		}
		if h.P50[i] != nil && (*h.P50[i] <= 0 || *h.P99[i] < *h.P50[i]) {
			t.Errorf("point %d: p50 %v s, p99 %v s", i, *h.P50[i], *h.P99[i])
		}
		if h.Conns[i] != 1 && i >= len(start.Time) {
			t.Errorf("point %d: %d connections, want 1", i, h.Conns[i])
		}
	}
	if want := float64(echoes + denied + 1); math.Abs(calls-want) > 0.01 {
		t.Errorf("the points' calls add up to %v, want %v", calls, want)
	}
	if math.Abs(errs-denied) > 0.01 || stalls != 1 {
		t.Errorf("the points' errors add up to %v, stalls to %v; want %d and 1", errs, stalls, denied)
	}
	if h.P50[0] != nil {
		t.Errorf("the first interval, with no call, has p50 %v", *h.P50[0])
	}

	// since= gives the points after a time the page has.
	later := getHistory(t, r.admin, "?since="+strconv.FormatFloat(h.Time[n-2], 'f', -1, 64))
	if len(later.Time) < 1 || later.Time[0] != h.Time[n-1] {
		t.Errorf("since the last point but one: %v, want from %v", later.Time, h.Time[n-1])
	}
	if code, _ := get(t, r.admin+"/history.json?since=yesterday"); code != http.StatusBadRequest {
		t.Errorf("since=yesterday: %d, want 400", code)
	}

	// The ring holds History / SampleInterval points, the newest.
	full := waitPoints(t, r, 39) // full
	time.Sleep(5 * interval)
	if got := r.h.History(0); len(got.Time) != 40 || got.Time[0] <= full.Time[0] {
		t.Errorf("after more samples than fit: %d points from %v, want 40, newer than %v", len(got.Time), got.Time[0], full.Time[0])
	}
}

// TestRatesAfterQuietSpell: a first reading after a quiet spell, with no
// page open, covers the time since the last sample, not since the handler
// began: the calls just made show as a rate over about one interval.
func TestRatesAfterQuietSpell(t *testing.T) {
	const interval = 100 * time.Millisecond
	r := newRigAdmin(t, nil, reactor.Options{}, admin.Options{SampleInterval: interval})
	c := r.dial(t)
	time.Sleep(15 * interval) // quiet: no call, no page
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 20 {
		if _, err := c.CallRaw(ctx, builtin.EchoPacket, []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	var st admin.Stats
	code, body := get(t, r.admin+"/stats.json")
	if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil {
		t.Fatalf("/stats.json: %d %v\n%s", code, err, body)
	}
	if st.RateWindow < interval.Seconds() || st.RateWindow > 5*interval.Seconds() {
		t.Errorf("the rates cover %v s after a quiet %v, samples %v apart: want about one interval", st.RateWindow, 15*interval, interval)
	}
	if st.LatencyWindow > 12*interval.Seconds() {
		t.Errorf("the percentiles cover %v s, want about ten intervals (%v)", st.LatencyWindow, 10*interval)
	}
	if st.Calls == nil || st.Calls.PerS <= 0 || st.Calls.Count != 20 {
		t.Errorf("calls: %+v, want a rate above 0 and 20 in the latency window", st.Calls)
	}
}
