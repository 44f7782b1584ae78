package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/rpcd/rpcd/load"
)

// writeJSON writes v as indented JSON and a newline.
func writeJSON(w *bytes.Buffer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // maps, strings and numbers: cannot fail
}

// writeReport writes rep to standard output as indented JSON, or as its
// text.
func (c *cli) writeReport(rep report, jsonOut bool) error {
	var b bytes.Buffer
	if jsonOut {
		writeJSON(&b, rep)
	} else {
		_ = rep.WriteText(&b)
	}
	return c.write(b.Bytes())
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	fh, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := fh.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressLine rewrites one line of a terminal with a run's progress:
// update runs on loadgen's progress goroutine, start and end around the run.
type progressLine struct {
	w io.Writer

	mu    sync.Mutex
	label string
	last  load.Progress
	open  bool // accepting updates
	drawn bool // a line is on the screen
}

// start opens the line for a run called label.
func (p *progressLine) start(label string, warmup time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.label, p.last, p.open = label, load.Progress{}, true
	if warmup > 0 {
		fmt.Fprintf(p.w, "\r\x1b[K%s: warming up for %v", label, warmup)
		p.drawn = true
	}
}

// update draws pr.
func (p *progressLine) update(pr load.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
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

// end erases the line and ignores later updates.
func (p *progressLine) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	p.open, p.drawn = false, false
}
