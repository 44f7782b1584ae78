package loadgen

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestCallsAndErrors(t *testing.T) {
	var n atomic.Int64
	res, err := Run(context.Background(), Config{Callers: 4, Calls: 1000}, func(_ context.Context, w int) (int, error) {
		if w < 0 || w >= 4 {
			t.Errorf("worker %d out of range", w)
		}
		switch k := n.Add(1); {
		case k%10 == 0:
			return 8, ErrWrongReply
		case k%25 == 0:
			return 0, errors.New("boom")
		}
		return 16, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Calls != 1000 || n.Load() != 1000 {
		t.Fatalf("%d calls counted, %d made; want 1000", res.Calls, n.Load())
	}
	if res.ErrorsBy["wrong reply"] != 100 || res.ErrorsBy["boom"] != 20 || res.Errors != 120 {
		t.Fatalf("errors %v (total %d)", res.ErrorsBy, res.Errors)
	}
	if res.CallsPerSec <= 0 || res.BytesPerSec <= 0 || res.P50US <= 0 || res.MaxUS < res.P99US || res.P99US < res.P50US {
		t.Fatalf("figures do not hold together: %+v", res)
	}
}

// TestLatencyPercentiles: a call that sleeps 2ms shows it in every
// percentile.
func TestLatencyPercentiles(t *testing.T) {
	res, err := Run(context.Background(), Config{Callers: 2, Calls: 40}, func(context.Context, int) (int, error) {
		time.Sleep(2 * time.Millisecond)
		return 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.P50US < 2000 || res.MaxUS < res.P999US {
		t.Fatalf("p50 %.0fµs, max %.0fµs; want p50 >= 2000µs", res.P50US, res.MaxUS)
	}
}

// TestOpenLoopCountsFromSchedule: when the server stalls, open-loop
// latency includes the time calls waited for their turn.
func TestOpenLoopCountsFromSchedule(t *testing.T) {
	var k atomic.Int64
	stall := func(context.Context, int) (int, error) {
		if k.Add(1) == 1 {
			time.Sleep(200 * time.Millisecond) // one stall of 200ms
		}
		return 0, nil
	}
	open, err := Run(context.Background(), Config{Callers: 1, Calls: 100, Rate: 1000}, stall)
	if err != nil {
		t.Fatal(err)
	}
	k.Store(0)
	closed, err := Run(context.Background(), Config{Callers: 1, Calls: 100}, stall)
	if err != nil {
		t.Fatal(err)
	}
	// Closed loop: one slow call, the rest instant, so the median is tiny.
	// Open loop at 1000/s: the calls scheduled during the stall all waited.
	if closed.P50US > 1000 {
		t.Fatalf("closed-loop p50 %.0fµs, want well under 1ms", closed.P50US)
	}
	if open.P50US < 50000 {
		t.Fatalf("open-loop p50 %.0fµs, want the stall to show (over 50ms)", open.P50US)
	}
}

func TestDurationAndWarmup(t *testing.T) {
	var calls atomic.Int64
	res, err := Run(context.Background(), Config{Callers: 2, Duration: 100 * time.Millisecond, Warmup: 50 * time.Millisecond},
		func(context.Context, int) (int, error) { calls.Add(1); time.Sleep(time.Millisecond); return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	if res.Calls == 0 || res.Calls >= calls.Load() {
		t.Fatalf("measured %d of %d calls; warm-up calls must not count", res.Calls, calls.Load())
	}
	if res.Elapsed < 100*time.Millisecond || res.Elapsed > 2*time.Second {
		t.Fatalf("ran %v for a 100ms duration", res.Elapsed)
	}
}

func TestBadConfig(t *testing.T) {
	noop := func(context.Context, int) (int, error) { return 0, nil }
	for _, cfg := range []Config{{Calls: 1}, {Callers: 1}, {Callers: 1, Calls: 1, Rate: -1}} {
		if _, err := Run(context.Background(), cfg, noop); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
}

// TestEndOfRunIsNotAnError: calls failing because the run's deadline has
// passed (a client that checks deadlines itself fails them before the
// context's timer fires) are the end of the run, not errors.
func TestEndOfRunIsNotAnError(t *testing.T) {
	res, err := Run(context.Background(), Config{Callers: 4, Duration: 50 * time.Millisecond},
		func(ctx context.Context, _ int) (int, error) {
			if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
				return 0, errors.New("deadline passed before the call was sent")
			}
			time.Sleep(100 * time.Microsecond)
			return 0, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 {
		t.Fatalf("%d errors at the end of a healthy run: %v", res.Errors, res.ErrorsBy)
	}
}

// TestCancelledCallsRunNotErrors: in a run of n calls cut short by its
// caller, the calls the cut interrupted are not errors.
func TestCancelledCallsRunNotErrors(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var started atomic.Int64
	res, err := Run(ctx, Config{Callers: 2, Calls: 1 << 40}, func(ctx context.Context, _ int) (int, error) {
		if started.Add(1) == 20 {
			cancel() // mid-run, with calls of both callers in flight around it: not by the clock, which a busy machine stretches
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Millisecond):
			return 0, nil
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || res.Calls == 0 {
		t.Fatalf("%d calls, %d errors (%v); want calls and no errors", res.Calls, res.Errors, res.ErrorsBy)
	}
}

func TestProgressStopsWithRun(t *testing.T) {
	var after atomic.Bool
	var returned atomic.Bool
	_, err := Run(context.Background(), Config{Callers: 1, Duration: 1100 * time.Millisecond, Progress: func(Progress) {
		if returned.Load() {
			after.Store(true)
		}
	}}, func(context.Context, int) (int, error) { time.Sleep(time.Millisecond); return 0, nil })
	returned.Store(true)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond)
	if after.Load() {
		t.Fatal("Progress called after Run returned")
	}
}

// BenchmarkClock shows why a caller reads time.Since: time.Now reads the
// wall clock and the monotonic one, time.Since of a time that has a
// monotonic reading only the second (65 to 82 against 35 to 48 ns here,
// a KVM guest, in five runs).
func BenchmarkClock(b *testing.B) {
	start := time.Now()
	var sink time.Duration
	b.Run("Now", func(b *testing.B) {
		for b.Loop() {
			now := time.Now() // what the callers did before
			sink += now.Sub(start)
		}
	})
	b.Run("Since", func(b *testing.B) {
		for b.Loop() {
			sink += time.Since(start)
		}
	})
	_ = sink
}

// TestBusy: BusySec is the time callers spent in calls, not waiting for
// their schedule: callers too few for the rate are busy all the time, and
// BusySec / Calls is the calls' own latency, not the latency from the
// schedule; callers ahead of a low rate are mostly idle.
func TestBusy(t *testing.T) {
	slow := func(context.Context, int) (int, error) {
		time.Sleep(2 * time.Millisecond)
		return 0, nil
	}
	short, err := Run(context.Background(), Config{Callers: 2, Duration: 300 * time.Millisecond, Rate: 10000}, slow)
	if err != nil {
		t.Fatal(err)
	}
	if busy := short.BusySec / (2 * short.Elapsed.Seconds()); busy < 0.9 {
		t.Errorf("2 callers of 2ms calls at 10000/s: busy %.2f of the time, want nearly all", busy)
	}
	if per := short.BusySec / float64(short.Calls) * 1e6; per < 2000 || per > 10000 || short.P50US < 10*per {
		t.Errorf("a call took %.0fµs in calls against p50 %.0fµs from the schedule; want 2ms or a little more, and p50 far above", per, short.P50US)
	}
	idle, err := Run(context.Background(), Config{Callers: 1, Duration: 300 * time.Millisecond, Rate: 50}, slow)
	if err != nil {
		t.Fatal(err)
	}
	if busy := idle.BusySec / idle.Elapsed.Seconds(); busy > 0.5 {
		t.Errorf("1 caller of 2ms calls at 50/s: busy %.2f of the time, want about 0.1", busy)
	}
}

// TestRecorderSent: a call recorded as Sent counts as a call and its
// bytes, and leaves the latencies to the calls that had one.
func TestRecorderSent(t *testing.T) {
	r := NewRecorder(2)
	r.Tally(0).Done(10*time.Microsecond, 10*time.Microsecond, 4)
	r.Tally(1).Sent(6)
	r.Tally(1).Failed("unavailable", time.Microsecond)
	for i := range 2 {
		r.Tally(i).Flush()
	}
	res := r.Result(time.Second, 0)
	if res.Calls != 3 || res.Errors != 1 || res.BytesPerSec != 10 {
		t.Errorf("calls %d, errors %d, bytes/s %v; want 3, 1, 10", res.Calls, res.Errors, res.BytesPerSec)
	}
	if res.MeanUS < 9.9 || res.MeanUS > 10.1 || res.MaxUS < 9.9 || res.MaxUS > 10.1 {
		t.Errorf("mean %v µs, max %v µs; want the one timed call's 10", res.MeanUS, res.MaxUS)
	}
}

// TestRecorderProgress: a Tally in use tells Progress its calls
// tallyPublish at a time, however Done and Sent mix, and a failure or a
// flush at once.
func TestRecorderProgress(t *testing.T) {
	r := NewRecorder(1)
	tl := r.Tally(0)
	for i := 1; i <= 3*tallyPublish; i++ {
		if i%2 == 0 {
			tl.Done(time.Microsecond, time.Microsecond, 1)
		} else {
			tl.Sent(1)
		}
		if calls, _ := r.Progress(); calls > int64(i) || calls <= int64(i-tallyPublish) {
			t.Fatalf("after %d calls Progress says %d: want fewer than %d behind", i, calls, tallyPublish)
		}
	}
	tl.Sent(1)
	tl.Failed("unavailable", time.Microsecond)
	if calls, errs := r.Progress(); calls != 3*tallyPublish+2 || errs != 1 {
		t.Fatalf("after a failure Progress says %d calls, %d errors; want %d, 1", calls, errs, 3*tallyPublish+2)
	}
	tl.Sent(1)
	tl.Flush()
	if calls, _ := r.Progress(); calls != 3*tallyPublish+3 {
		t.Fatalf("after a flush Progress says %d calls, want %d", calls, 3*tallyPublish+3)
	}
}
