package loadgen

import (
	"sync"
	"time"
)

// Wheel is an open loop's scheduler: a timing wheel of WheelSize
// buckets of WheelTick each, an entry in the bucket of its due time; one
// further off than the wheel's span waits there for the rounds between.
// A pacer goroutine advances it at every tick's end (Pace, or Fire from a
// loop of its own) and makes the calls that came due, each at most a tick
// after its time, so that a load has no runtime timer per caller: Run's
// open loop wakes its callers from one, and package load starts its
// pipes' calls from one per pacer.
//
// Times are durations on the user's own clock (time since an origin of
// its choosing, on the monotonic clock). Fire and Pace are called from one
// goroutine at a time (they reuse the wheel's room for what is due), the
// other methods from any. The zero Wheel is empty, tick 0 advanced over;
// Reset starts its ticks at another time.
type Wheel[E any] struct {
	mu      sync.Mutex
	buckets [WheelSize][]Entry[E]
	cur     int64         // the last tick advanced over
	n       int           // entries held
	wake    chan struct{} // Pace's, while it waits for an entry: Add to an empty wheel signals it

	due []Entry[E] // Fire's room, reused
}

// A Wheel's shape: a round of about a second.
const (
	// WheelTick is the time a Wheel's bucket spans, and how late a call
	// may start once its pacer wakes.
	WheelTick = time.Millisecond
	// WheelSize is how many buckets a Wheel has.
	WheelSize = 1024
)

// Entry is what a Wheel holds: an item and the time it is due.
type Entry[E any] struct {
	Item E
	Due  time.Duration
}

// Add puts item in the bucket of due, or of the next tick if due's has
// been advanced over.
func (w *Wheel[E]) Add(item E, due time.Duration) {
	t := int64(due / WheelTick)
	w.mu.Lock()
	if t <= w.cur {
		t = w.cur + 1
	}
	b := &w.buckets[t%WheelSize]
	*b = append(*b, Entry[E]{item, due})
	if w.n++; w.n == 1 && w.wake != nil {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	w.mu.Unlock()
}

// Advance appends to out the entries of the ticks that have passed by
// now, taking them out: each at most a tick late. Entries of now's own
// tick wait for its end, so that a pacer that advances the wheel at each
// tick's end, or more often, makes a tick's calls together.
func (w *Wheel[E]) Advance(now time.Duration, out []Entry[E]) []Entry[E] {
	end := int64(now/WheelTick) - 1 // the last whole tick
	w.mu.Lock()
	defer w.mu.Unlock()
	from := w.cur + 1
	if end-from >= WheelSize {
		from = end - WheelSize + 1 // a round or more behind: each bucket once
	}
	for t := from; t <= end; t++ {
		b := &w.buckets[t%WheelSize]
		keep := (*b)[:0]
		for _, e := range *b {
			if int64(e.Due/WheelTick) <= end {
				out = append(out, e)
			} else {
				keep = append(keep, e) // a later round
			}
		}
		w.n -= len(*b) - len(keep)
		clear((*b)[len(keep):])
		*b = keep
	}
	w.cur = max(w.cur, end)
	return out
}

// Fire takes out the entries due by now, as Advance does, and calls fire
// with each and now, without the wheel's lock held, so that fire may Add
// to it.
func (w *Wheel[E]) Fire(now time.Duration, fire func(e Entry[E], now time.Duration)) {
	w.due = w.Advance(now, w.due[:0])
	for _, e := range w.due {
		fire(e, now)
	}
	clear(w.due) // drop the items' pointers
	w.due = w.due[:0]
}

// Pace is a pacer's loop: at the end of every tick on the clock now, it
// fires the entries of the ticks that have passed, each at most a tick
// (and the timer's own lateness) after its time, until done is closed.
// While the wheel is empty it sleeps, with no timer, until an entry is
// added: a closed loop's pacer, which only restarts callers after
// failures, costs nothing while none fails, where a tick every
// millisecond woke it (and, as often as not, a thread) a thousand times
// a second for nothing.
func (w *Wheel[E]) Pace(done <-chan struct{}, now func() time.Duration, fire func(e Entry[E], now time.Duration)) {
	w.mu.Lock()
	if w.wake == nil {
		w.wake = make(chan struct{}, 1)
	}
	w.mu.Unlock()
	t := time.NewTimer(WheelTick - now()%WheelTick)
	defer t.Stop()
	for {
		if w.empty() {
			t.Stop()
			select {
			case <-w.wake:
			case <-done:
				return
			}
			t.Reset(WheelTick - now()%WheelTick)
		}
		select {
		case <-t.C:
		case <-done:
			return
		}
		w.Fire(now(), fire)
		t.Reset(WheelTick - now()%WheelTick) // the end of the tick now is in
	}
}

// empty reports whether the wheel holds no entry.
func (w *Wheel[E]) empty() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n == 0
}

// Clear empties the wheel.
func (w *Wheel[E]) Clear() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.buckets {
		clear(w.buckets[i])
		w.buckets[i] = w.buckets[i][:0]
	}
	w.n = 0
}

// Reset starts the wheel's ticks at now: entries due before it are given
// back at the first tick after it.
func (w *Wheel[E]) Reset(now time.Duration) {
	w.mu.Lock()
	w.cur = int64(now/WheelTick) - 1
	w.mu.Unlock()
}
