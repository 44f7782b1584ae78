package engine

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// rec is a side's record of a call, as a test keeps it.
type rec struct{ id uint32 }

// TestCalls: calls are found by id whether they sit in their ring
// place or, with an older call still in it, in the shard's map; an id a
// waiting call holds is never given again; forget and take agree on who
// completes a call; close returns every call and refuses new ones.
func TestCalls(t *testing.T) {
	if size := unsafe.Sizeof(callShard[rec]{}); size%64 != 0 {
		t.Fatalf("a shard is %d bytes, not a whole number of cache lines", size)
	}
	var c Calls[rec]
	s := &c.one[0]
	head := unsafe.Offsetof(c.one) + max(unsafe.Offsetof(s.mu)+unsafe.Sizeof(s.mu),
		unsafe.Offsetof(s.waiting)+unsafe.Sizeof(s.waiting), unsafe.Offsetof(s.more)+unsafe.Sizeof(s.more))
	if unsafe.Sizeof(uintptr(0)) == 8 && head > 64 {
		t.Fatalf("a table's fields and its one shard's lock, count and map end at byte %d: past its first cache line", head)
	}
	tb := NewCalls[rec](32)
	const n = 5 * 32 * callRing // five times round every ring
	calls := make([]*rec, n)
	held := map[uint32]*rec{}
	for i := range calls {
		calls[i] = &rec{}
		if tb.Add(calls[i], &calls[i].id) == 0 {
			t.Fatal("add refused on an open table")
		}
		if held[calls[i].id] != nil {
			t.Fatalf("id %d given to two waiting calls", calls[i].id)
		}
		held[calls[i].id] = calls[i]
		if i%4 != 0 { // most are answered at once; every fourth waits on
			if got := tb.Take(calls[i].id); got != calls[i] {
				t.Fatalf("Take(%d) = %p, want %p", calls[i].id, got, calls[i])
			}
			delete(held, calls[i].id)
		}
	}
	inMap := 0
	for i := range tb.shards {
		inMap += len(tb.shards[i].more)
	}
	if inMap == 0 {
		t.Fatal("no call went to a shard's map: the test does not reach it")
	}
	if got := tb.Len(); got != len(held) {
		t.Fatalf("Len = %d, want %d", got, len(held))
	}
	if !tb.Waiting() {
		t.Fatal("Waiting() = false with calls held")
	}

	// An id still held is skipped when the counter comes round to it.
	var old *rec
	for _, cl := range held {
		old = cl
		break
	}
	tb.next.Store(old.id - 1)
	again := &rec{}
	tb.Add(again, &again.id)
	if again.id == old.id {
		t.Fatalf("id %d given again while its call waits", old.id)
	}
	held[again.id] = again

	// Taken in any order, each call comes out once, by take or by forget.
	ids := make([]uint32, 0, len(held))
	for id := range held {
		ids = append(ids, id)
	}
	rand.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	for i, id := range ids[:len(ids)/2] {
		cl := held[id]
		if i%2 == 0 {
			if got := tb.Take(id); got != cl {
				t.Fatalf("Take(%d) = %p, want %p", id, got, cl)
			}
		} else if !tb.Forget(cl.id, cl) {
			t.Fatalf("Forget of waiting call %d = false", id)
		}
		if tb.Take(id) != nil || tb.Forget(cl.id, cl) {
			t.Fatalf("call %d came out twice", id)
		}
		delete(held, id)
	}
	stranger := &rec{id: ids[len(ids)-1]} // the id of a waiting call, not that call
	if tb.Forget(stranger.id, stranger) {
		t.Fatal("forget removed another call with the same id")
	}

	// TakeIf takes exactly the calls it matches.
	some := tb.TakeIf(func(cl *rec) bool { return cl.id%3 == 0 })
	for id, cl := range some {
		if id != cl.id || cl.id%3 != 0 || held[cl.id] != cl {
			t.Fatalf("TakeIf returned call %d", cl.id)
		}
		delete(held, cl.id)
	}

	all := tb.Close()
	if len(all) != len(held) {
		t.Fatalf("Close returned %d calls, want %d", len(all), len(held))
	}
	for id, cl := range all {
		if held[id] != cl {
			t.Fatalf("Close returned call %d, which was not waiting", id)
		}
	}
	if r := (&rec{}); tb.Add(r, &r.id) != 0 || tb.Waiting() || tb.Len() != 0 {
		t.Fatal("a closed table took a call, or still holds some")
	}
}

// TestCallsWaiting: Waiting turns true with a shard's first call and false
// with its last, however the calls leave (taken, forgotten, taken by
// match), on a table of one shard and of several.
func TestCallsWaiting(t *testing.T) {
	for _, shards := range []int{1, 8} {
		tb := NewCalls[rec](shards)
		if tb.Waiting() {
			t.Fatalf("%d shards: a new table has calls waiting", shards)
		}
		recs := make([]rec, 3*shards)
		for i := range recs {
			tb.Add(&recs[i], &recs[i].id)
			if !tb.Waiting() {
				t.Fatalf("%d shards: Waiting() = false after %d adds", shards, i+1)
			}
		}
		for i := range recs {
			switch r := &recs[i]; i % 3 {
			case 0:
				tb.Take(r.id)
			case 1:
				tb.Forget(r.id, r)
			default:
				tb.TakeIf(func(c *rec) bool { return c == r })
			}
			if got, want := tb.Waiting(), i < len(recs)-1; got != want {
				t.Fatalf("%d shards: Waiting() = %v with %d of %d calls gone", shards, got, i+1, len(recs))
			}
		}
	}
}

// TestCallsReserve: ids reserved for calls kept outside the table come in
// Add's order and never include 0; once the ids have wrapped the table
// says so, and skips the ids its skip function reports held, which before
// that it never asks about; Holds finds the table's own calls alone.
func TestCallsReserve(t *testing.T) {
	tb := NewCalls[rec](2)
	asked := false
	held := map[uint32]bool{}
	tb.SetSkip(func(id uint32) bool { asked = true; return held[id] })
	r1 := &rec{}
	id1 := tb.Add(r1, &r1.id)
	first := tb.Reserve(4)
	r2 := &rec{}
	if id2 := tb.Add(r2, &r2.id); first != id1+1 || id2 != first+4 {
		t.Fatalf("Add %d, Reserve(4) %d, Add %d: want consecutive", id1, first, id2)
	}
	if !tb.Holds(id1) || tb.Holds(first) || tb.Holds(first+4+1) {
		t.Fatalf("Holds: the table's call %d %v, reserved %d %v, unused %d %v", id1, tb.Holds(id1), first, tb.Holds(first), first+5, tb.Holds(first+5))
	}
	if tb.Wrapped() || asked {
		t.Fatalf("before the wrap: Wrapped %v, skip asked %v; want neither", tb.Wrapped(), asked)
	}

	tb.next.Store(^uint32(0) - 2) // the next block of 4 would run through 0
	got := tb.Reserve(4)
	if got != 2 || !tb.Wrapped() {
		t.Fatalf("Reserve across the wrap: %d, Wrapped %v; want the block after 0's, 2, and true", got, tb.Wrapped())
	}
	held[got+4] = true // a call kept outside holds the id Add would give next
	r3 := &rec{}
	if id3 := tb.Add(r3, &r3.id); id3 != got+5 || !asked {
		t.Fatalf("Add after the wrap gave %d (skip asked: %v); want %d, past the id held outside", id3, asked, got+5)
	}
}
