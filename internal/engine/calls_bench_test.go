package engine

import (
	"fmt"
	"testing"
)

// BenchmarkCallsAddTake is a call's way through a table: entered, then
// taken by its answer, with 128 others waiting (1 × 128's steady state).
func BenchmarkCallsAddTake(b *testing.B) {
	for _, shards := range []int{1, 8} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			type rec struct{ id uint32 }
			t := NewCalls[rec](shards)
			recs := make([]rec, 128)
			for i := range recs {
				t.Add(&recs[i], &recs[i].id)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r := &recs[i%len(recs)]
				if t.Take(r.id) != r {
					b.Fatal("lost a call")
				}
				t.Add(r, &r.id)
			}
		})
	}
}
