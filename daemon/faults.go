package daemon

import (
	"context"
	"math/rand/v2"
	"syscall"
	"time"
)

// Faults is a fault plan for a Process, as rpcd chaos runs it: stop the
// daemon at random, by SIGKILL or by SIGTERM (a drain), and start it again
// with the same arguments.
type Faults struct {
	Every time.Duration // mean time between stops; each wait is drawn from half to one and a half of it
	Down  time.Duration // how long the daemon stays down before it is started again
	Term  float64       // the share of stops that are a SIGTERM rather than a SIGKILL, 0 to 1
}

// Run stops p and starts it again as f says until ctx ends, and returns the
// process running at the end (for the caller to Stop), the stops by signal
// name and the restarts. A daemon stopped when ctx ends is started again
// first. A restart that fails ends the run with its error and a nil
// process.
func (f Faults) Run(ctx context.Context, p *Process) (*Process, map[string]int, int, error) {
	stops, restarts := map[string]int{}, 0
	sleep := func(d time.Duration) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	for {
		if sleep(time.Duration(float64(f.Every) * (0.5 + rand.Float64()))); ctx.Err() != nil {
			return p, stops, restarts, nil
		}
		sig := syscall.SIGKILL
		if rand.Float64() < f.Term {
			sig = syscall.SIGTERM
		}
		p.Signal(sig)
		stops[sig.String()]++
		sleep(f.Down)
		var err error
		if p, err = p.Restart(context.WithoutCancel(ctx)); err != nil {
			return nil, stops, restarts, err
		}
		restarts++
	}
}
