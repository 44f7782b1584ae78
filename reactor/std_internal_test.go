package reactor

import (
	"net"
	"testing"
	"time"
)

// TestStdPokeAfterEnd: a poke on a standard library transport connection
// whose goroutine has just ended still has its done called. Shutdown's
// wakeAll waits for every done; one left in a dead connection's list (a
// client hanging up as the server drained) held Shutdown until its context
// ran out.
func TestStdPokeAfterEnd(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	l := &stdLink{nc: a}
	called := make(chan string, 2)
	l.poke(func() { called <- "before" }) // the goroutine's exit calls it
	for _, done := range l.end() {
		done()
	}
	l.poke(func() { called <- "after" }) // no goroutine left to: poke does
	for _, want := range []string{"before", "after"} {
		select {
		case got := <-called:
			if got != want {
				t.Fatalf("done %q called, want %q", got, want)
			}
		case <-time.After(time.Second):
			t.Fatalf("the done of the poke %s the end was never called", want)
		}
	}
}
