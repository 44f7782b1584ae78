package reactor

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/rpcd/rpcd/proto"
)

// The sweeper enforces the limits that need a clock: the handshake and
// whole-frame deadlines, the idle timeout, keep-alive pings and the
// maximum connection age with its grace. (The
// write-progress deadline is a write deadline, on the goroutine a
// connection moves to when its peer does not take its output: write.go.) It reads what each connection's loop records and acts through
// the loop (a Wake), never on a connection directly. It also keeps the
// coarse clock the loops read, so they never read the system clock for
// these limits.

// sweep runs until stop closes.
func (s *Server) sweep(stop <-chan struct{}) {
	tick := time.NewTicker(s.opts.sweepEvery())
	defer tick.Stop()
	var conns []*conn
	for {
		select {
		case <-stop:
			return
		case t := <-tick.C:
			now := t.UnixNano()
			s.clock.Store(now)
			conns = s.snapshot(conns[:0])
			for _, c := range conns {
				s.check(c, now)
			}
			clear(conns) // hold no connection past its close
		}
	}
}

// check applies the timed limits to one connection.
func (s *Server) check(c *conn, now int64) {
	o := &s.opts
	since := func(t int64) time.Duration { return time.Duration(now - t) }
	lastRead := c.lastRead.Load()
	if c.authedAt.Load() == 0 && since(c.openedAt) > o.HandshakeTimeout {
		c.end(proto.CodeUnauthenticated, fmt.Sprintf("no handshake within %v", o.HandshakeTimeout))
		return
	}
	if c.maxAge > 0 && c.pastAge(now) {
		return
	}
	if fs := c.frameStart.Load(); fs != 0 && since(fs) > o.FrameTimeout {
		c.end(proto.CodeDeadlineExceeded, fmt.Sprintf("a frame not completed within %v", o.FrameTimeout))
		return
	}
	if o.IdleTimeout > 0 && since(lastRead) > o.IdleTimeout {
		c.end(proto.CodeUnavailable, fmt.Sprintf("idle for %v", o.IdleTimeout))
		return
	}
	if o.KeepAlive > 0 {
		switch ps := c.pingSent.Load(); {
		case ps != 0 && lastRead >= ps:
			c.pingSent.Store(0) // answered, or traffic came
		case ps != 0 && since(ps) > o.KeepAliveTimeout:
			c.end(proto.CodeUnavailable, fmt.Sprintf("no answer to a ping within %v", o.KeepAliveTimeout))
			return
		case ps == 0 && since(lastRead) > o.KeepAlive:
			c.pingSent.Store(now)
			c.wantPing.Store(true)
			c.wake()
		}
	}
}

// DefaultMaxConnAgeGrace is Options.MaxConnAgeGrace's default: how long
// a connection past its maximum age has to finish what it runs.
const DefaultMaxConnAgeGrace = 30 * time.Second

// maxConnAge returns the maximum age, in nanoseconds, of a connection
// opened now: Options.MaxConnAge give or take up to a tenth of it at random
// (grpc's jitter), so that connections opened together, as a client's are
// after a restart, do not all go away together; 0 if there is none.
func (o *Options) maxConnAge() int64 {
	if o.MaxConnAge <= 0 {
		return 0
	}
	age := int64(o.MaxConnAge)
	j := age / 10
	return age - j + rand.Int64N(2*j+1)
}

// msgAged is what the GoAway of a connection past its maximum age, and
// the refusal of its later calls, say.
const msgAged = "connection past its maximum age"

// pastAge applies the maximum age to a connection that has one, at now:
// past it, the loop sends a GoAway (once; service) and the connection
// carries on with the calls it has; past its grace after that, it ends.
// It reports whether the connection ends.
func (c *conn) pastAge(now int64) bool {
	o := &c.s.opts
	age := now - c.openedAt
	switch {
	case age <= c.maxAge:
		return false
	case o.MaxConnAgeGrace >= 0 && age > c.maxAge+int64(o.MaxConnAgeGrace):
		c.end(proto.CodeUnavailable, fmt.Sprintf("%s and its grace (%v)", msgAged, o.MaxConnAgeGrace))
		return true
	case !c.aged.Load():
		c.s.log.Debug("rpcd: GoAway to a connection past its maximum age", "remote", c.remote, "age", time.Duration(age))
		c.aged.Store(true)
		c.wake()
	}
	return false
}

// end asks the connection's loop to send a GoAway saying why and close.
func (c *conn) end(code proto.Code, msg string) {
	if c.ending.CompareAndSwap(nil, &ending{code: code, msg: msg}) {
		c.wake()
	}
}

// wake has the connection's own goroutine do a wake-up's work: its event
// loop, or its standard library transport's reader.
func (c *conn) wake() { c.wakeThen(nil) }

// wakeThen is wake with a function to call after that work.
func (c *conn) wakeThen(done func()) {
	if c.closed.Load() {
		if done != nil {
			done()
		}
		return
	}
	if l := c.std.Load(); l != nil {
		if c.ending.Load() != nil {
			// A connection being ended may be blocked writing to a peer
			// that reads nothing (a subscriber cut off for it): cut the
			// write short. Each write sets its own deadline first, so a
			// GoAway written after this still goes out.
			_ = l.nc.SetWriteDeadline(time.Unix(1, 0))
		}
		l.poke(done)
		return
	}
	var cb gnet.AsyncCallback
	if done != nil {
		cb = func(gnet.Conn, error) error { done(); return nil }
	}
	if err := c.gc.Wake(cb); err != nil {
		c.s.log.Debug("rpcd: waking a connection", "remote", c.remote, "err", err)
		if done != nil {
			done()
		}
	}
}
