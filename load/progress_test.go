package load

import (
	"bytes"
	"testing"
	"time"
)

// TestProgressLine: a run's line warms up, shows its calls per second
// since the last update, and is erased at its end, after which updates
// draw nothing until the next run starts.
func TestProgressLine(t *testing.T) {
	var b bytes.Buffer
	p := NewProgressLine(&b)
	f := p.Func("Sum 1×1", time.Second)
	f(Progress{Starting: true})
	f(Progress{Elapsed: time.Second, Calls: 100, Errors: 1})
	f(Progress{Elapsed: 2 * time.Second, Calls: 300, Errors: 1})
	p.End()
	f(Progress{Elapsed: 3 * time.Second, Calls: 400})
	want := "\r\x1b[KSum 1×1: warming up for 1s" +
		"\r\x1b[KSum 1×1: 1s  100 calls  100 calls/s  1 errors" +
		"\r\x1b[KSum 1×1: 2s  300 calls  200 calls/s  1 errors" +
		"\r\x1b[K"
	if b.String() != want {
		t.Errorf("drew %q, want %q", b.String(), want)
	}
}
