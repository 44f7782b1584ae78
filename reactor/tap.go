package reactor

import (
	"context"
	"time"

	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/proto"
)

// A tap (transport.Tap, SetTap) sees every frame a connection reads and
// writes, whole and as on the wire, for a recording. The goroutine that
// serves a connection (its event loop, or its own goroutine) feeds the
// tap itself, so that a connection's calls reach it in the order they
// happened and its methods never race for one connection:
//
//   - in: readFrames gives it each whole frame before running it (a
//     large frame gathered apart, once whole: gatherBig);
//   - out: write gives it each frame of the output it is about to write:
//     the wake-up's batched buffer, whose frames are whole once appended
//     (a reply's after FinishFrameWith), and a large reply's payload from
//     the handler's own slice joined to its head (writeOwn). What a
//     connection held and hands to its goroutine was given when first
//     written (tapSkip).
//
// Without a tap, each frame read and each write costs one atomic load
// and a comparison (tapping).

// tapSet is a tap as one SetTap set it: a connection compares the one it
// last saw with the server's by pointer, so that a tap set again counts
// as new.
type tapSet struct{ t transport.Tap }

// tapWait bounds how long SetTap waits for the connections the replaced
// tap recorded to end their recording on their own goroutines.
const tapWait = time.Second

// SetTap has t see the frames of every connection from now on, in and
// out, each whole as on the wire (transport.Tap); nil removes the tap.
// A connection open already is offered to t (TapOpen) before its next
// frame, either way; one opened later, before its first. Without a tap
// the hot path pays one atomic load a frame.
//
// The tap replaced gets TapClose for each connection it accepted that is
// still open. Only the goroutine serving a connection calls its tap, so
// SetTap wakes each connection the old tap records and waits, at most a
// second, until the connection's loop or goroutine has closed it there:
// one whose loop is held longer (an inline handler that does not return)
// closes it when it next runs, and one that closes meanwhile as it closes.
// A connection that the old tap offered itself to at the very moment of
// the change may be closed on it only at its next frame or wake-up. Once
// SetTap has returned, the old tap sees no more frames but from those.
func (s *Server) SetTap(t transport.Tap) {
	var ts *tapSet
	if t != nil {
		ts = &tapSet{t: t}
	}
	s.tapMu.Lock()
	defer s.tapMu.Unlock()
	if old := s.tap.Swap(ts); old == nil || !s.serving() {
		return // nothing recorded; or no loop runs to wake (a closed connection has closed its tap)
	}
	var conns []*conn
	for _, c := range s.snapshot(nil) {
		if c.tapped.Load() {
			conns = append(conns, c)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), tapWait)
	defer cancel()
	s.wake(ctx, conns)
}

// serving reports whether the server's loops and goroutines run: it has
// started and has not stopped.
func (s *Server) serving() bool {
	select {
	case <-s.ready:
	default:
		return false
	}
	if s.startErr != nil {
		return false
	}
	select {
	case <-s.drained:
		return false
	default:
		return true
	}
}

// Tap returns the tap SetTap set; nil without one.
func (s *Server) Tap() transport.Tap {
	if ts := s.tap.Load(); ts != nil {
		return ts.t
	}
	return nil
}

// tapping returns the tap that sees c's frames, nil if none: on the
// first frame after the server's tap changed, it closes c on the tap it
// had (TapClose) and offers it to the new one (TapOpen). Called only by
// the goroutine serving c.
func (c *conn) tapping() transport.Tap {
	ts := c.s.tap.Load()
	if ts == c.tapOn {
		if c.tapOK {
			return ts.t
		}
		return nil
	}
	c.tapEnd()
	c.tapOn = ts
	if ts == nil || !ts.t.TapOpen(c.id, c.remote) {
		return nil
	}
	c.tapOK = true
	c.tapped.Store(true)
	return ts.t
}

// tapCheck closes c on a tap that has been replaced or removed, at a
// wake-up: SetTap wakes the connections its old tap records for this.
func (c *conn) tapCheck() {
	if c.tapOn != nil && c.s.tap.Load() != c.tapOn {
		c.tapEnd()
	}
}

// tapEnd closes c on the tap it had, if that tap records it: the
// connection closes, or the tap was replaced.
func (c *conn) tapEnd() {
	if c.tapOK {
		c.tapOK = false
		c.tapped.Store(false)
		c.tapOn.t.TapClose(c.id)
	}
	c.tapOn = nil
}

// tapIn gives the tap, if any, frame, a whole frame c has read.
func (c *conn) tapIn(frame []byte) {
	if t := c.tapping(); t != nil {
		t.TapFrame(c.id, false, frame)
	}
}

// tapOut gives the tap, if any, the frames c is about to write: out, the
// last of whose frames goes on in own when own is not nil (writeOwn). The
// first c.tapSkip bytes of out were given already.
func (c *conn) tapOut(out, own []byte) {
	skip := c.tapSkip
	c.tapSkip = 0
	t := c.tapping()
	if t == nil {
		return
	}
	b := out[skip:]
	for len(b) >= proto.HeaderSize {
		n := proto.FrameLen(b)
		if n > len(b) {
			if n == len(b)+len(own) { // a large reply written from the handler's slice
				t.TapFrame(c.id, true, append(append(make([]byte, 0, n), b...), own...))
			}
			return
		}
		t.TapFrame(c.id, true, b[:n])
		b = b[n:]
	}
}
