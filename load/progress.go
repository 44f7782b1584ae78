package load

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// ProgressLine draws the progress of runs on one line of a terminal,
// rewriting it in place: what `rpcd bench` shows on standard error while
// it runs. Its methods may be called from any goroutine.
type ProgressLine struct {
	w io.Writer

	mu    sync.Mutex
	label string
	last  Progress
	open  bool // accepting updates
	drawn bool // a line is on the screen
}

// NewProgressLine returns a ProgressLine that draws on w, a terminal.
func NewProgressLine(w io.Writer) *ProgressLine { return &ProgressLine{w: w} }

// Func returns a Config.Progress for the run called label: it draws
// "warming up" while the run warms up for warmup, then its seconds, calls,
// calls per second since the last update, and errors.
func (p *ProgressLine) Func(label string, warmup time.Duration) func(Progress) {
	return func(pr Progress) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if pr.Starting {
			p.label, p.last, p.open = label, Progress{}, true
			if warmup > 0 {
				fmt.Fprintf(p.w, "\r\x1b[K%s: warming up for %v", label, warmup)
				p.drawn = true
			}
			return
		}
		if !p.open {
			return
		}
		var rate float64
		if d := (pr.Elapsed - p.last.Elapsed).Seconds(); d > 0 {
			rate = float64(pr.Calls-p.last.Calls) / d
		}
		fmt.Fprintf(p.w, "\r\x1b[K%s: %.0fs  %d calls  %.0f calls/s  %d errors", p.label, pr.Elapsed.Seconds(), pr.Calls, rate, pr.Errors)
		p.last, p.drawn = pr, true
	}
}

// End erases the line and ignores the updates that come after, until the
// next run starts.
func (p *ProgressLine) End() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	p.open, p.drawn = false, false
}
