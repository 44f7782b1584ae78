package load

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/loadgen"
)

func TestMedianRun(t *testing.T) {
	mk := func(cps float64, errs int64) *Report {
		return &Report{CallsPerSec: cps, Errors: errs, ErrorsBy: map[string]int64{"unavailable": errs}}
	}
	m := Median([]*Report{mk(300, 1), mk(100, 0), mk(200, 2)})
	if m.CallsPerSec != 200 || m.Runs != 3 || m.Errors != 3 || m.ErrorsBy["unavailable"] != 3 {
		t.Fatalf("median of 100, 200, 300 calls/s: %+v", m)
	}
	if m := Median([]*Report{mk(300, 0), mk(100, 0)}); m.CallsPerSec != 100 {
		t.Fatalf("median of two runs is the lower, got %v", m.CallsPerSec)
	}
	if m := Median([]*Report{mk(5, 1)}); m.Runs != 1 || m.Errors != 1 {
		t.Fatalf("one run: %+v", m)
	}
}

// TestRuns: every cell runs once per sweep, the sweeps one after the
// other; each cell's median run comes back, in the cells' order; an error
// stops the runs and is returned with the medians made until then.
func TestRuns(t *testing.T) {
	cells := []Config{{Calls: 1}, {Calls: 2}}
	var order []int64
	cps := map[int64][]float64{1: {10, 30, 20}, 2: {5, 1, 3}}
	reps, err := Runs(context.Background(), cells, 3, func(c Config) (*Report, error) {
		order = append(order, c.Calls)
		n := len(order) / 2
		if c.Calls == 2 {
			n = (len(order) - 1) / 2
		}
		return &Report{CallsPerSec: cps[c.Calls][n]}, nil
	})
	if err != nil || len(reps) != 2 || reps[0].CallsPerSec != 20 || reps[1].CallsPerSec != 3 {
		t.Fatalf("%v, %v; want the medians 20 and 3", reps, err)
	}
	if fmt.Sprint(order) != "[1 2 1 2 1 2]" {
		t.Fatalf("runs in the order %v, want [1 2 1 2 1 2]", order)
	}
	boom := errors.New("boom")
	reps, err = Runs(context.Background(), cells, 3, func(c Config) (*Report, error) {
		if c.Calls == 2 {
			return nil, boom
		}
		return &Report{CallsPerSec: 1}, nil
	})
	if err != boom || len(reps) != 1 {
		t.Fatalf("%v, %v; want the first cell's one run and the error", reps, err)
	}
}

func TestIntLen(t *testing.T) {
	for _, v := range []int64{0, 7, -7, 9, 10, -10, 99, 100, 123456789, -1000003, math.MaxInt64, math.MinInt64} {
		if got, want := intLen(v), len(strconv.FormatInt(v, 10)); got != want {
			t.Errorf("intLen(%d) = %d, want %d", v, got, want)
		}
	}
}

// TestBenchRawCallAllocs checks that the load generator adds no allocation
// to a raw call during a timed run (-d): the reply buffer is the caller's,
// and the run's end is the call's deadline. It counts the client and the
// in-process server together, as the client's own allocation test does.
func TestBenchRawCallAllocs(t *testing.T) {
	addr := serveBuiltin(t)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cl, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	req := Pattern(16)
	reply := make([]byte, 0, 64)
	bare := func() {
		if reply, err = cl.CallRaw(ctx, builtin.EchoPacket, req, reply[:0]); err != nil {
			t.Fatal(err)
		}
	}
	sc, _ := LookupScenario("EchoPacket16")
	w := &worker{call: sc.NewCall(cl, 0)}
	bench := func() {
		if _, err := w.do(ctx, runTimeout); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 { // warm the pools
		bare()
		bench()
	}
	bareAllocs := testing.AllocsPerRun(2000, bare)
	benchAllocs := testing.AllocsPerRun(2000, bench)
	untimed := func() { // -n: no run deadline, so a context per call
		if _, err := w.do(context.Background(), runTimeout); err != nil {
			t.Fatal(err)
		}
	}
	untimedAllocs := testing.AllocsPerRun(2000, untimed)
	t.Logf("allocations per call: %.2f by CallRaw alone, %.2f through bench during -d, %.2f during -n", bareAllocs, benchAllocs, untimedAllocs)
	// The race detector's pools drop items at random, so the counts vary
	// by one; the client's own bound, at most one, holds either way.
	if benchAllocs > 1 {
		t.Errorf("%.2f allocations per call through bench, want at most 1 (%.2f by CallRaw alone)", benchAllocs, bareAllocs)
	}
}

// TestRateShortfallIdle: callers that were mostly idle and still fell
// behind point at this process, not at their number.
func TestRateShortfallIdle(t *testing.T) {
	res := loadgen.Result{Calls: 1000, Elapsed: time.Second, CallsPerSec: 1000, BusySec: 0.2, CPUPerCallUS: 500}
	note := rateShortfall(2000, 2, 2, res)
	want := "-rate 2000 not reached: 1000 calls/s, 50% of it. The callers were idle 95% of the time yet fell behind their schedule: this process could not keep up (500.0 µs of its CPU a call, GOMAXPROCS "
	if !strings.HasPrefix(note, want) {
		t.Errorf("%q\nwant it to begin %q", note, want)
	}
}
