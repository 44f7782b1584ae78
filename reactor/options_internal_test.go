package reactor

import (
	"runtime"
	"testing"
)

// TestDefaultLoopsLeaveAP: by default the server runs one event loop fewer
// than there are Ps, at least one, so that a loop waiting in epoll_wait on
// every P cannot keep the rest of the process from Go's network poller
// (Options.Loops); a number set is kept.
func TestDefaultLoopsLeaveAP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for procs, want := range map[int]int{1: 1, 2: 1, 4: 3, 16: 15} {
		runtime.GOMAXPROCS(procs)
		if got := (Options{}).withDefaults().Loops; got != want || DefaultLoops() != want {
			t.Errorf("GOMAXPROCS %d: %d loops by default (DefaultLoops %d), want %d", procs, got, DefaultLoops(), want)
		}
		if got := (Options{Loops: procs}).withDefaults().Loops; got != procs {
			t.Errorf("GOMAXPROCS %d, Loops %d: %d loops", procs, procs, got)
		}
	}
}
