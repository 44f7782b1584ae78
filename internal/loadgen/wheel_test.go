package loadgen

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestWheel: a timing wheel gives each entry back once its tick has
// passed, at most a tick late, and keeps those a round or more ahead.
func TestWheel(t *testing.T) {
	w := new(Wheel[int])
	w.Reset(0)
	dues := []time.Duration{0, 500 * time.Microsecond, 3 * time.Millisecond, 3*time.Millisecond + 999*time.Microsecond,
		WheelSize*WheelTick + 2*time.Millisecond, 3 * WheelSize * WheelTick}
	for i, due := range dues {
		w.Add(i, due)
	}
	got := map[int]time.Duration{}
	for now := time.Duration(0); now <= 4*WheelSize*WheelTick; now += WheelTick / 2 {
		for _, e := range w.Advance(now, nil) {
			if _, twice := got[e.Item]; twice {
				t.Fatalf("entry %d given back twice", e.Item)
			}
			got[e.Item] = now
		}
	}
	for i, due := range dues {
		at, ok := got[i]
		if !ok || at < due || at > due+2*WheelTick {
			t.Errorf("entry due at %v given back at %v (%v); want within two ticks after", due, at, ok)
		}
	}
	// An entry whose time has passed goes in the next tick.
	w.Add(9, 0)
	if e := w.Advance(4*WheelSize*WheelTick+2*WheelTick, nil); len(e) != 1 || e[0].Item != 9 {
		t.Errorf("a late entry: %v, want it at the next tick", e)
	}
}

// TestWheelOnTime: an entry is given back by the first Advance at or
// after the end of its tick, not before, whatever the steps between
// Advances and wherever its time falls in a tick (a round or more ahead
// too): a pacer that advances the wheel at each tick's end makes each call
// at most a tick late.
func TestWheelOnTime(t *testing.T) {
	const step = 300 * time.Microsecond // not a divisor of the tick
	w := new(Wheel[int])
	w.Reset(0)
	dues := []time.Duration{0, 100 * time.Microsecond, 999 * time.Microsecond, time.Millisecond, 1700 * time.Microsecond,
		5*time.Millisecond + 1, WheelSize*WheelTick + 450*time.Microsecond, 2*WheelSize*WheelTick + 3*time.Millisecond + 10}
	got := map[int]time.Duration{}
	for i, due := range dues {
		w.Add(i, due)
	}
	for now := 50 * time.Microsecond; now <= 3*WheelSize*WheelTick; now += step {
		for _, e := range w.Advance(now, nil) {
			if _, twice := got[e.Item]; twice {
				t.Fatalf("entry %d given back twice", e.Item)
			}
			got[e.Item] = now
		}
	}
	for i, due := range dues {
		tickEnd := (due/WheelTick + 1) * WheelTick
		if at, ok := got[i]; !ok || at < tickEnd || at-step >= tickEnd {
			t.Errorf("entry due at %v given back at %v (%v); want at the first step at or after %v, its tick's end", due, at, ok, tickEnd)
		}
	}
}

// TestWheelFire: Fire hands over each entry due, with its time, and lets
// fire add to the wheel (a pacer's caller scheduling its next call):
// what fire adds comes back at a later Fire, not in the same one. A wheel
// far behind (a pacer that stalled past a round) gives back every entry
// due once. Clear drops what the wheel holds.
func TestWheelFire(t *testing.T) {
	w := new(Wheel[int])
	const every = 3 * time.Millisecond
	for i := range 4 {
		w.Add(i, time.Duration(i)*time.Millisecond)
	}
	fired := map[int][]time.Duration{}
	var now time.Duration
	fire := func(e Entry[int], at time.Duration) {
		if at != now || e.Due > now {
			t.Errorf("entry %d due at %v fired at %v (told %v), before its time", e.Item, e.Due, now, at)
		}
		fired[e.Item] = append(fired[e.Item], e.Due)
		w.Add(e.Item, e.Due+every) // the next call of the same caller
	}
	for now = 0; now < 30*time.Millisecond; now += WheelTick {
		w.Fire(now, fire)
	}
	for i := range 4 {
		if n := len(fired[i]); n < 9 || n > 10 {
			t.Errorf("entry %d fired %d times in 30 ms every 3 ms (%v), want 9 or 10", i, n, fired[i])
		}
		for k, due := range fired[i] {
			if want := time.Duration(i)*time.Millisecond + time.Duration(k)*every; due != want {
				t.Errorf("entry %d's call %d due at %v, want %v", i, k, due, want)
			}
		}
	}

	clear(fired)
	now += 5 * WheelSize * WheelTick // a stall of five rounds
	w.Fire(now, func(e Entry[int], _ time.Duration) { fired[e.Item] = append(fired[e.Item], e.Due) })
	for i := range 4 {
		if len(fired[i]) != 1 {
			t.Errorf("after a stall, entry %d fired %d times, want once", i, len(fired[i]))
		}
	}
	w.Clear()
	w.Fire(now+10*WheelSize*WheelTick, func(e Entry[int], _ time.Duration) { t.Errorf("entry %d fired after Clear", e.Item) })
}

// TestWheelPace: Pace fires what comes due on the clock it is given, and
// returns once done is closed.
func TestWheelPace(t *testing.T) {
	w := new(Wheel[int])
	start := time.Now()
	clock := func() time.Duration { return time.Since(start) }
	type firing struct {
		e   Entry[int]
		now time.Duration
	}
	fired := make(chan firing, 3)
	for i := range 3 {
		w.Add(i, time.Duration(i)*WheelTick)
	}
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		w.Pace(done, clock, func(e Entry[int], now time.Duration) { fired <- firing{e, now} })
	}()
	defer func() { // Pace's end, also when the test fails
		close(done)
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			t.Error("Pace did not return when done closed")
		}
	}()
	for range 3 {
		var f firing
		select {
		case f = <-fired:
		case <-time.After(10 * time.Second):
			t.Fatal("Pace fired nothing in 10 s")
		}
		if f.now < f.e.Due || f.now > clock() {
			t.Errorf("entry %d due at %v fired at %v, its clock then %v", f.e.Item, f.e.Due, f.now, clock())
		}
	}
}

// TestWheelPaceIdle: a pacer whose wheel is empty sleeps until an entry
// is added, with no tick (a tick reads the clock), and fires it once it
// is; done ends the sleep too.
func TestWheelPaceIdle(t *testing.T) {
	w := new(Wheel[int])
	start := time.Now()
	var reads atomic.Int64
	clock := func() time.Duration { reads.Add(1); return time.Since(start) }
	fired := make(chan Entry[int], 1)
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		w.Pace(done, clock, func(e Entry[int], _ time.Duration) { fired <- e })
	}()
	defer func() {
		close(done)
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			t.Error("an idle Pace did not return when done closed")
		}
	}()
	for round := range 2 { // idle, fire, idle again
		time.Sleep(50 * WheelTick)
		// Reads since the last entry: to set its tick, to fire it and to
		// set the next tick, which finds the wheel empty. A pacer that
		// ticked would have read it twice a tick.
		if n := reads.Swap(0); n > 3 {
			t.Errorf("round %d: the pacer read its clock %d times in 50 ticks with nothing to fire", round, n)
		}
		w.Add(round, time.Since(start))
		select {
		case e := <-fired:
			if e.Item != round {
				t.Errorf("fired entry %d, want %d", e.Item, round)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: an entry added to an idle wheel did not fire in 10 s", round)
		}
	}
}
