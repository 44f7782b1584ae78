package load

import (
	"strings"
	"testing"

	"github.com/rpcd/rpcd/handler/builtin"
)

// TestJudgeSoak: growth of the server's heap, resident memory or
// goroutines after the warm-up, a window short of the rate, or too few
// windows, each fail a soak; noise within the bounds does not.
func TestJudgeSoak(t *testing.T) {
	const rate = 1000
	window := func(warm bool, cps float64, heapMiB, rssMiB uint64, goroutines int) SoakWindow {
		return SoakWindow{Warmup: warm, CallsPerSec: cps,
			Server: builtin.StatsReply{HeapInuse: heapMiB << 20, RSS: rssMiB << 20, Goroutines: goroutines}}
	}
	tests := []struct {
		name    string
		windows []SoakWindow
		flat    bool
		reached bool
		growth  string
	}{
		{"steady", []SoakWindow{window(true, 900, 500, 500, 900), window(false, 999, 100, 120, 50), window(false, 1000, 105, 121, 52), window(false, 995, 104, 122, 51), window(false, 1000, 108, 125, 60)}, true, true, ""},
		{"heap grows", []SoakWindow{window(false, 1000, 100, 120, 50), window(false, 1000, 120, 121, 50), window(false, 1000, 150, 122, 50), window(false, 1000, 200, 123, 50)}, false, true, "heap in use grew from a peak of 120.0 MiB to 200.0 MiB"},
		{"rss grows", []SoakWindow{window(false, 1000, 100, 120, 50), window(false, 1000, 100, 160, 50)}, false, true, "resident memory grew"},
		{"goroutines grow", []SoakWindow{window(false, 1000, 100, 120, 50), window(false, 1000, 100, 120, 50), window(false, 1000, 100, 120, 120)}, false, true, "goroutines grew from a peak of 50 to 120"},
		{"rate short", []SoakWindow{window(false, 1000, 100, 120, 50), window(false, 900, 100, 120, 50)}, true, false, ""},
		{"too short", []SoakWindow{window(true, 1000, 100, 120, 50), window(false, 1000, 100, 120, 50)}, false, true, "too few to judge"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := &SoakReport{Windows: tt.windows, Conns: 10}
			judgeSoak(rep, rate)
			if rep.Flat != tt.flat || rep.RateReached != tt.reached {
				t.Errorf("flat %v, rate reached %v; want %v, %v (%q)", rep.Flat, rep.RateReached, tt.flat, tt.reached, rep.Growth)
			}
			if got := strings.Join(rep.Growth, "; "); !strings.Contains(got, tt.growth) || (tt.growth == "" && got != "") {
				t.Errorf("growth %q, want %q", got, tt.growth)
			}
		})
	}
}
