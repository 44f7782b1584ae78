package reactor

import (
	"errors"
	"io"
	"os"
	"runtime/debug"
	"sync"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/rpcd/rpcd/proto"
)

// events is the gnet side of a Server: the event loops call its methods.
// It is a type of its own so that they stay out of Server's API.
type events struct {
	gnet.BuiltinEventEngine
	*Server
}

// OnOpen sets up a connection, or turns it away while draining.
func (s *events) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	if s.draining.Load() {
		s.stats.connsRefused.Add(1)
		return proto.AppendGoAway(nil, 0, proto.CodeUnavailable, "server is draining"), gnet.Close
	}
	c := newConn(s.Server, gc, gc.RemoteAddr())
	c.lw = s.loopWatchOf(gc.EventLoop(), c)
	gc.SetContext(c)
	s.enrol(c)
	return nil, gnet.None
}

// enrol counts a new connection of either transport as open, for the
// sweeper, Peers and Shutdown.
func (s *Server) enrol(c *conn) {
	s.enrolUnlessDraining(c, false)
}

// enrolUnlessDraining enrols c, or with check set reports false and
// enrols nothing once the server drains. The check is made under the lock
// Shutdown takes once it has set draining, so that a connection not
// refused is among those Shutdown then wakes and stops (a goroutine of the
// standard library transport enrols its connection itself, and one that
// enrolled after Shutdown had looked would hold it up for good).
func (s *Server) enrolUnlessDraining(c *conn, check bool) bool {
	c.lastRead.Store(s.clock.Load())
	s.mu.Lock()
	if check && s.draining.Load() {
		s.mu.Unlock()
		return false
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	s.nconns.Add(1)
	s.stats.connsOpened.Add(1)
	return true
}

// forget ends what a closed connection of either transport had: its calls,
// subscriptions and streams, its large-frame buffer, its place among the
// open connections.
func (s *Server) forget(c *conn) {
	c.tapEnd()
	c.closeCalls()
	if c.big != nil {
		c.releaseBig()
	}
	s.mu.Lock()
	delete(s.conns, c)
	s.unwatchLocked(c)
	s.stats.bytesIn.Add(c.bytesIn.Load()) // the closed connections' bytes
	s.stats.bytesOut.Add(c.bytesOut.Load())
	s.mu.Unlock()
	s.nconns.Add(-1)
}

// OnClose cancels what the connection had in flight. A connection that
// has left its loop (handoff.go) is no longer the loop's to end. One whose
// peer has shut down its side (a FIN) with calls still to answer leaves
// the loop to answer them (half-close).
func (s *events) OnClose(gc gnet.Conn, err error) gnet.Action {
	c, ok := gc.Context().(*conn)
	if !ok {
		return gnet.None
	}
	if errors.Is(err, io.EOF) && c.owes() {
		c.peerDone = true
		if c.handOff(gc, false) {
			return gnet.None
		}
	}
	s.forget(c)
	if err != nil && !errors.Is(err, os.ErrClosed) {
		s.log.Debug("rpcd: connection closed", "remote", c.remote, "err", err)
	}
	return gnet.None
}

// outPool holds the buffers that collect one wake-up's replies.
var outPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// OnTraffic runs every whole frame the connection has buffered and writes
// all their replies with one call (more only past the high-water mark,
// Options.MaxOutbound). It also acts for the sweeper (a Ping to send, a
// connection to end) and for the blocking pool (replies to write). A
// connection whose output the socket does not take whole, which must end
// with a GoAway, or whose peer has shut down its side with calls still to
// answer, leaves the loop for a goroutine of its own (handoff.go).
func (s *events) OnTraffic(gc gnet.Conn) (action gnet.Action) {
	c := gc.Context().(*conn)
	defer func() {
		if p := recover(); p != nil { // a bug of rpcd's: lose the connection, not the process
			s.log.Error("rpcd: panic serving a connection; closing it", "remote", c.remote, "panic", p, "stack", string(debug.Stack()))
			action = gnet.Close
		}
	}()
	if in := gc.InboundBuffered(); in > c.inboundLeft {
		c.bytesIn.Add(uint64(in - c.inboundLeft))
		c.lastRead.Store(s.clock.Load()) // bytes arrived since the last wake-up
	}
	bp := outPool.Get().(*[]byte)
	out, action := c.service(gc, (*bp)[:0])
	out = c.flush(out)
	if cap(out) <= 2*s.opts.Limits.MaxFrameSize { // let a huger buffer go
		*bp = out[:0]
		outPool.Put(bp)
	}
	switch {
	case c.lost:
	case action != gnet.None:
		c.handOff(gc, true) // to linger after its GoAway
	case c.held != nil || c.peerDone && c.owes():
		c.handOff(gc, false)
	case !c.peerDone:
		c.watch(gc)
		return gnet.None
	}
	return gnet.Close // the loop's part ends; a connection handed off goes on
}

// service does a wake-up's work for a connection of either transport and
// returns what is left to write: a GoAway if the sweeper ends it, else its
// own GoAway once the server drains or it is past its maximum age, a Ping
// the sweeper asked for, the blocking pool's replies, and the answers to
// every whole frame in. Past the high-water mark it writes what it has
// before it runs more frames, and stops once the socket does not take it
// all.
func (c *conn) service(in inbound, out []byte) ([]byte, gnet.Action) {
	if c.tapOn != nil {
		c.tapCheck() // a tap replaced: SetTap woke the connection for this
	}
	if r := c.ending.Load(); r != nil {
		return c.endNow(out, r), gnet.Close
	}
	if !c.goingAway && (c.s.draining.Load() || c.aged.Load()) {
		out = c.goAway(out) // a drain's, or the connection's maximum age's (sweep.go)
	}
	if c.wantPing.Load() && c.wantPing.CompareAndSwap(true, false) { // a load first: no locked instruction per wake-up
		out = proto.AppendPing(out, nil)
	}
	out = c.takeReplies(out)
	var action gnet.Action
	for {
		out, action = c.readFrames(in, out)
		if len(c.fan.order) > 0 {
			c.fan.flush() // the subscribers' Messages from this wake-up's publishes
		}
		if action != gnet.None || !c.more || c.lost || c.held != nil {
			break
		}
		out = c.flush(out)
		if c.lost || c.held != nil {
			break
		}
	}
	if c.lost {
		return out[:0], gnet.Close
	}
	return out, action
}

// owes reports whether the connection has calls or output still to
// answer or write: Blocking calls, the outbox, open streams.
func (c *conn) owes() bool {
	c.mu.Lock()
	owes := c.running.Len() > 0 || len(c.replies) > 0
	c.mu.Unlock()
	return owes || c.streams.Open() > 0
}

// inbound is the input side of a connection that frames are read from:
// gnet's connection, or the standard library transport's buffer.
type inbound interface {
	Peek(n int) ([]byte, error) // n <= 0: everything buffered
	Discard(n int) (int, error)
	InboundBuffered() int
}

// watch records, for the sweeper, whether a frame is left half read.
func (c *conn) watch(gc gnet.Conn) {
	c.inboundLeft = gc.InboundBuffered()
	switch {
	case c.inboundLeft == 0 && c.big == nil:
		c.frameStart.Store(0)
	case c.frameStart.Load() == 0:
		c.frameStart.Store(c.s.clock.Load()) // a frame has begun to arrive
	}
}

// bigFrame is the size from which a frame that is still arriving is
// gathered into a buffer of its own, taken from gnet's input as it comes,
// rather than left in gnet's ring buffer, which would copy it on every
// read and once more to make it contiguous.
const bigFrame = 64 << 10

// readFrames runs every whole frame buffered on gc and appends the replies
// to out. It looks at the first frame's header alone until that frame is
// whole, so a large frame arriving in pieces is not copied over and over;
// then it takes everything buffered in one Peek (a view into gnet's buffer
// when nothing was left over from an earlier wake-up), runs the whole
// frames in it, and discards them at once. It stops early, setting c.more,
// once out holds Options.MaxOutbound bytes or a write has left output
// held, so that a connection's unsent output stays bounded. A frame that
// breaks the protocol ends the connection with a GoAway saying why.
func (c *conn) readFrames(gc inbound, out []byte) ([]byte, gnet.Action) {
	c.more = false
	if c.big != nil {
		whole, err := false, error(nil)
		if out, whole, err = c.gatherBig(gc, out); err != nil {
			return c.protocolError(out, err)
		} else if !whole {
			return out, gnet.None
		}
	}
	lim := c.limits()
	b, err := gc.Peek(proto.HeaderSize)
	if err != nil {
		return out, gnet.None // not a whole header yet
	}
	var f proto.Frame
	err = proto.DecodeHeaderInto(&f.Header, b, lim) // in place: DecodeFrame fills in the sections
	if err == nil && gc.InboundBuffered() < f.Len() {
		if f.Len() >= bigFrame {
			c.startBig(f.Header)
			out, _, err = c.gatherBig(gc, out) // not whole: fewer bytes are buffered
		}
		if err == nil {
			return out, gnet.None // the header is good; wait for the rest
		}
	}
	var now time.Time
	done, n := 0, f.Len()
	if err == nil {
		buf, _ := gc.Peek(-1)            // holds the first frame whole
		err = proto.DecodeFrame(&f, buf) // its header is checked: only its sections are left
		for err == nil && n > 0 {
			if f.Deadline > 0 && now.IsZero() {
				now = time.Now()
			}
			c.tapIn(buf[done : done+n])
			var end *ending
			if out, end = c.handleFrame(&f, out, now); end != nil {
				return c.endNow(out, end), gnet.Close
			}
			done += n
			if len(out) >= c.s.opts.MaxOutbound || c.held != nil || c.lost {
				c.more = true // the rest after this output is written
				break
			}
			// The next frame, if it is whole (n == 0: not yet, for the
			// next wake-up).
			n, err = f.Decode(buf[done:], c.limits())
		}
	}
	if done > 0 {
		_, _ = gc.Discard(done) // the frames' views end here
	}
	if err != nil {
		return c.protocolError(out, err)
	}
	return out, gnet.None
}

// limits returns the limits frames are read under: tighter before the
// handshake.
func (c *conn) limits() *proto.Limits {
	if c.authed {
		return &c.s.opts.Limits
	}
	return &c.s.preAuth
}

// endNow appends the GoAway that ends the connection for reason e.
func (c *conn) endNow(out []byte, e *ending) []byte {
	c.s.log.Info("rpcd: closing connection", "remote", c.remote, "reason", e.msg)
	return proto.AppendGoAway(out, c.lastID, e.code, e.msg)
}

// protocolError ends the connection on bytes that break the protocol: a
// GoAway saying why, after the replies already made.
func (c *conn) protocolError(out []byte, err error) ([]byte, gnet.Action) {
	c.s.log.Info("rpcd: closing connection on a protocol error", "remote", c.remote, "err", err)
	return proto.AppendGoAway(out, c.lastID, proto.CodeInternal, err.Error()), gnet.Close
}

// bigBufs holds the buffers large frames are gathered in.
var bigBufs sync.Pool

// startBig begins gathering a large frame whose accepted header is h.
// Its buffer grows with the bytes that come, so that a header alone (a
// peer that claims 4 MiB and sends nothing more) holds no more memory than
// it sent: at most twice what has arrived, and at least bigStart.
func (c *conn) startBig(h proto.Header) {
	if p, ok := bigBufs.Get().(*[]byte); ok {
		c.big = (*p)[:0]
	} else {
		c.big = []byte{} // not nil: a large frame is being gathered
	}
	c.bigHeader = h
}

// bigStart is the least room a large frame's buffer is given.
const bigStart = 256 << 10

// gatherBig moves what gc has buffered of the large frame being gathered
// into its buffer; once the frame is whole, it runs it, appending the reply
// to out, and reports true.
func (c *conn) gatherBig(gc inbound, out []byte) ([]byte, bool, error) {
	n := c.bigHeader.Len()
	avail, _ := gc.Peek(-1)
	k := min(len(avail), n-len(c.big))
	if need := len(c.big) + k; need > cap(c.big) {
		c.growBig(need, n)
	}
	c.big = append(c.big, avail[:k]...)
	_, _ = gc.Discard(k)
	if len(c.big) < n {
		c.readBig(n)
	}
	if len(c.big) < n {
		return out, false, nil
	}
	defer c.releaseBig()
	f := proto.Frame{Header: c.bigHeader}
	if err := proto.DecodeFrame(&f, c.big); err != nil {
		return out, false, err
	}
	c.tapIn(c.big)
	var now time.Time
	if f.Deadline > 0 {
		now = time.Now()
	}
	out, end := c.handleFrame(&f, out, now)
	if end != nil {
		return out, false, errors.New(end.msg) // a large frame cannot be a Hello: only after the handshake
	}
	return out, true, nil
}

// growBig gives the large frame's buffer room for need bytes of the n the
// frame has: twice its size, and at least bigStart, so that it holds at
// most twice what has arrived. The smaller buffer is left to the
// collector: pooled, it would be the next one taken.
func (c *conn) growBig(need, n int) {
	grown := make([]byte, len(c.big), min(n, max(need, 2*cap(c.big), bigStart)))
	copy(grown, c.big)
	c.big = grown
}

// readBig reads the rest of the large frame being gathered, n bytes long
// in all, straight from the socket into its buffer, once gnet's input is
// taken: one read takes whatever the socket holds, where gnet would read it
// 64 KiB a wake-up into its own buffer, to be copied from there. It reads
// nothing past the frame, so gnet reads what follows, and stops when the
// socket has nothing more: the next wake-up goes on. A failed read, or the
// peer's end, loses the connection.
func (c *conn) readBig(n int) {
	if c.gc == nil || c.std.Load() != nil { // the standard library transport reads in its own way
		return
	}
	fd := c.gc.Fd()
	if fd < 0 { // no socket (a test's connection)
		return
	}
	for len(c.big) < n {
		if len(c.big) == cap(c.big) {
			c.growBig(len(c.big)+1, n)
		}
		m, err := readSocket(fd, c.big[len(c.big):min(n, cap(c.big))])
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.EAGAIN {
			return
		}
		if err != nil || m == 0 {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			// The peer is gone, or has shut down its side inside the frame:
			// the frame is lost, the calls before it are answered.
			c.s.log.Debug("rpcd: reading a large frame", "remote", c.remote, "err", err)
			c.peerDone = true
			return
		}
		c.big = c.big[:len(c.big)+m]
		c.bytesIn.Add(uint64(m))
		c.lastRead.Store(c.s.clock.Load())
	}
}

// releaseBig returns the large frame's buffer to the pool.
func (c *conn) releaseBig() {
	b := c.big[:0]
	c.big = nil
	if cap(b) > 0 && cap(b) <= c.s.opts.Limits.MaxFrameSize {
		bigBufs.Put(&b)
	}
}
