package record

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
)

// TestRecorderMergesShards: connections whose frames go to different
// shards are written in the order of their times, each connection's in
// its own order, none missing.
func TestRecorderMergesShards(t *testing.T) {
	const conns, calls = 2 * shards, 200
	b, s := record(t, Options{Answers: true}, func(r *Recorder) {
		for c := uint64(1); c <= conns; c++ {
			r.TapOpen(c, addr)
		}
		for i := uint32(1); i <= calls; i++ {
			for c := uint64(1); c <= conns; c++ {
				r.TapFrame(c, false, request(i, "A/B", "x"))
				r.TapFrame(c, true, response(i, "y"))
			}
		}
		for c := uint64(1); c <= conns; c++ {
			r.TapClose(c)
		}
	})
	if s.Lost != 0 || s.Frames != 2*conns*calls || s.Conns != conns {
		t.Fatalf("stats %+v", s)
	}
	rd, err := NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var last time.Duration
	next := map[uint64]uint32{} // the id each connection's next request has
	for n := 0; ; n++ {
		e, err := rd.Next()
		if err != nil {
			break
		}
		if e.At < last {
			t.Fatalf("entry %d (%v conn %d) at %v, after one at %v", n, e.Type, e.Conn, e.At, last)
		}
		last = e.At
		if e.Type == EntryFrame && !e.Out {
			if want := next[e.Conn] + 1; e.Frame.ID != want {
				t.Fatalf("conn %d: request %d, want %d", e.Conn, e.Frame.ID, want)
			}
			next[e.Conn] = e.Frame.ID
		}
	}
	for c := uint64(1); c <= conns; c++ {
		if next[c] != calls {
			t.Errorf("conn %d: %d requests, want %d", c, next[c], calls)
		}
	}
}

// TestCallTable: the table of calls awaiting answers agrees with a map
// through inserts, overwrites, lookups and deletes, ids crowded together
// and scattered.
func TestCallTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, spread := range []uint32{64, 1 << 12, 1 << 31} {
		var tab callTable
		want := map[uint32]string{}
		routes := []string{"A/B", "C/D", "E/F"}
		for i := 0; i < 200000; i++ {
			id := rng.Uint32N(spread)
			switch rng.IntN(3) {
			case 0:
				rt := routes[rng.IntN(len(routes))]
				tab.put(id, rt)
				want[id] = rt
			case 1:
				got, ok := tab.get(id)
				if w, wok := want[id]; got != w || ok != wok {
					t.Fatalf("spread %d, op %d: get(%d) = %q, %v; want %q, %v", spread, i, id, got, ok, w, wok)
				}
			case 2:
				got, ok := tab.take(id)
				if w, wok := want[id]; got != w || ok != wok {
					t.Fatalf("spread %d, op %d: take(%d) = %q, %v; want %q, %v", spread, i, id, got, ok, w, wok)
				}
				delete(want, id)
			}
			if tab.n != len(want) {
				t.Fatalf("spread %d, op %d: %d entries, want %d", spread, i, tab.n, len(want))
			}
		}
		for id, w := range want {
			if got, ok := tab.get(id); !ok || got != w {
				t.Errorf("spread %d: at the end get(%d) = %q, %v; want %q", spread, id, got, ok, w)
			}
		}
	}
}
