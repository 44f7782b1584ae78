package metrics

import (
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/proto"
)

// TestShardLayout: a shard is whole 128-byte blocks with at least one
// block of padding after its counters, so two shards never share a line.
func TestShardLayout(t *testing.T) {
	size := unsafe.Sizeof(shard{})
	counters := unsafe.Offsetof(shard{}.buckets) + unsafe.Sizeof(shard{}.buckets)
	if size%128 != 0 || size-counters < 128 {
		t.Fatalf("a shard is %d bytes with %d of counters", size, counters)
	}
}

// TestShardsAddUp: a route has a shard per P up to maxShards; Snapshot adds
// every shard's counters, a call begun on one shard and ended on another
// is not in flight, and calls from goroutines on every P are all counted.
func TestShardsAddUp(t *testing.T) {
	m := New()
	r := m.route("T/Sharded")
	if want := min(runtime.GOMAXPROCS(0), maxShards); len(r.shards) != want {
		t.Fatalf("%d shards, want %d", len(r.shards), want)
	}
	r.shards = make([]shard, 4) // whatever this machine's Ps: four to add up
	r.shards[0].started.Add(2)
	r.shards[3].codes[transport.CodeSlot(proto.CodeOK)].Add(1) // begun on shard 0, ended on 3
	r.shards[3].buckets[bucketOf(1000)].Add(1)
	r.shards[3].sum.Add(1000)
	r.shards[1].started.Add(1)
	r.shards[1].codes[transport.CodeSlot(proto.CodeNotFound)].Add(1)
	r.shards[1].buckets[bucketOf(3000)].Add(1)
	r.shards[1].sum.Add(3000)
	s := m.Snapshot()[0]
	if s.Total() != 2 || s.Calls[0] != 1 || s.Errors() != 1 || s.InFlight != 1 ||
		s.Latency.Count() != 2 || s.Latency.Sum != 4000 {
		t.Fatalf("snapshot %+v", s)
	}

	const workers, calls = 8, 2000
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range calls {
				r.start()
				if i%16 == 0 {
					runtime.Gosched() // move between Ps now and then
				}
				r.done(proto.CodeOK, time.Microsecond)
			}
		})
	}
	wg.Wait()
	s = m.Snapshot()[0]
	if s.Calls[0] != 1+workers*calls || s.InFlight != 1 || s.Latency.Count() != 2+workers*calls {
		t.Fatalf("after %d calls on every P: %d OK, %d in flight, %d timed", workers*calls, s.Calls[0], s.InFlight, s.Latency.Count())
	}
}
