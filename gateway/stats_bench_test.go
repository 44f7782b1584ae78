package gateway

import (
	"net/http"
	"testing"
)

// BenchmarkCountResponse is what counting costs a response: the mutex,
// the map's lookup and add, from every P at once.
func BenchmarkCountResponse(b *testing.B) {
	b.ReportAllocs()
	var c counters
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.response("Math/Sum", http.StatusOK)
		}
	})
}
