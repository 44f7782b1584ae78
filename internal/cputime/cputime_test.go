//go:build unix || windows

package cputime

import (
	"testing"
	"time"
)

// TestProcess: the CPU time is known here and grows with work done.
func TestProcess(t *testing.T) {
	before := Process()
	if before <= 0 {
		t.Fatalf("Process() = %v before any work; want the time the test binary used to start", before)
	}
	x := 0
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
		x++ // busy: CPU time, not sleep
	}
	if after := Process(); after <= before {
		t.Fatalf("Process() = %v after 50 ms of busy work, %v before", after, before)
	}
	_ = x
}
