package reactor

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/linger"
	"github.com/rpcd/rpcd/internal/readbuf"
	"github.com/rpcd/rpcd/proto"
)

// The standard library transport serves the same protocol, with the same
// registry, limits and shutdown, on a goroutine per connection over any
// net.Conn. It is how rpcd serves TLS, which gnet's loops cannot (they see
// the socket's bytes, and TLS needs crypto/tls between them and the
// frames), and where a connection goes that leaves its event loop
// (handoff.go). Each connection's goroutine reads into a buffer of its
// own, runs the frames the way an event loop does (service, readFrames,
// handleFrame) and writes the replies of each read with one Write, which
// waits while the peer reads: it reads nothing meanwhile, so that TCP
// holds back a peer that sends faster than it reads.

// stdLink is a connection's input buffer and its hand-offs, for the
// transport's goroutine.
type stdLink struct {
	nc net.Conn
	in *readbuf.Buf // what is read of nc; at least 64 KiB (newStdLink)

	kick chan struct{} // a poke, for a goroutine that is not reading (half-closed)
	shut atomic.Bool   // the server has stopped: the goroutine returns

	mu    sync.Mutex
	acks  []func() // to call after the next service pass
	poked bool
	ended bool // the goroutine has returned: nothing will call acks
}

// Frames under bigFrame are read whole in a link's buffer; larger ones are
// gathered apart (startBig), so the buffer never needs more than its
// largest size.
const _ = uint(readbuf.MaxSize - (bigFrame - 1))

// newStdLink returns a link reading nc, its buffer holding carry (what an
// event loop had read and not run) first. The buffer is readbuf.MaxSize,
// 64 KiB, and no smaller: one read takes in a burst of calls.
func newStdLink(nc net.Conn, carry []byte) *stdLink {
	return &stdLink{nc: nc, in: readbuf.NewWith(nc, readbuf.MaxSize, carry), kick: make(chan struct{}, 1)}
}

// Peek implements inbound: with n <= 0, all that is buffered. It never
// reads: runStd does, with Fill.
func (l *stdLink) Peek(n int) ([]byte, error) {
	b := l.in.Bytes()
	if n <= 0 {
		return b, nil
	}
	if len(b) < n {
		return nil, io.ErrShortBuffer
	}
	return b[:n], nil
}

// Discard implements inbound: it discards what is buffered, and no more.
func (l *stdLink) Discard(n int) (int, error) {
	return l.in.Discard(min(n, l.in.Buffered()))
}

// InboundBuffered implements inbound.
func (l *stdLink) InboundBuffered() int { return l.in.Buffered() }

// poke interrupts the goroutine's read so that it does a wake-up's work,
// then calls done. Once the goroutine has ended, it calls done at once:
// a poke can race with the connection's end (Shutdown's wakeAll with a
// client hanging up), and a done left in acks then would never be called.
func (l *stdLink) poke(done func()) {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		if done != nil {
			done()
		}
		return
	}
	if done != nil {
		l.acks = append(l.acks, done)
	}
	l.poked = true
	_ = l.nc.SetReadDeadline(time.Unix(1, 0)) // in the past: Read returns at once
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// await waits for a poke, at most d.
func (l *stdLink) await(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.kick:
	case <-t.C:
	}
}

// stop ends the goroutine at once, wherever it waits: the server has
// stopped (Shutdown's last step).
func (l *stdLink) stop() {
	l.shut.Store(true)
	_ = l.nc.Close()
	l.poke(nil)
}

// unpoke clears a poke before the work it asks for, and returns the
// functions to call after it.
func (l *stdLink) unpoke() []func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.poked = false
	_ = l.nc.SetReadDeadline(time.Time{})
	acks := l.acks
	l.acks = nil
	return acks
}

// end marks the goroutine as returned, and returns the functions still to
// call; pokes after it call theirs themselves.
func (l *stdLink) end() []func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = true
	acks := l.acks
	l.acks = nil
	return acks
}

// ServeConn serves nc, a connection the server did not accept itself (a
// WebSocket's: package ws), on the standard library transport, on the
// calling goroutine, until it ends; a *tls.Conn has its handshake first.
// The server must be serving (Start or Serve): a connection that comes
// before, or once it drains, or past MaxConns, gets a GoAway and is
// closed. Shutdown ends it as it ends the server's own connections.
func (s *Server) ServeConn(nc net.Conn) {
	select {
	case <-s.ready:
	default:
		s.refuse(nc, proto.CodeUnavailable, "server is not serving yet")
		return
	}
	s.mu.Lock() // Shutdown sets draining and then takes mu: no Add after its Wait
	if s.startErr != nil || s.draining.Load() {
		s.mu.Unlock()
		s.refuse(nc, proto.CodeUnavailable, "server is draining")
		return
	}
	s.stdConns.Add(1)
	s.mu.Unlock()
	s.serveStd(nc)
}

// serveStd serves one connection of the TLS transport, or one given to
// ServeConn, on the calling goroutine until it ends.
func (s *Server) serveStd(nc net.Conn) {
	defer s.stdConns.Done()
	var id *handler.Identity
	if tc, ok := nc.(*tls.Conn); ok {
		_ = tc.SetDeadline(time.Now().Add(s.opts.HandshakeTimeout))
		if err := tc.Handshake(); err != nil {
			s.log.Info("rpcd: TLS handshake failed", "remote", nc.RemoteAddr(), "err", err)
			nc.Close()
			return
		}
		_ = tc.SetDeadline(time.Time{})
		id = peerIdentity(tc)
	}
	if s.nconns.Load() >= int64(s.opts.MaxConns) {
		s.refuse(nc, proto.CodeResourceExhausted, "too many connections")
		return
	}
	l := newStdLink(nc, nil)
	c := newConn(s, nil, nc.RemoteAddr())
	c.lw = s.ownWatch(c)
	c.std.Store(l)
	if id != nil && s.opts.Authenticator == nil {
		c.identity, c.call.Identity = id, id // a verified client certificate
		c.peer.identity.Store(id)
	}
	if !s.enrolUnlessDraining(c, true) {
		s.refuse(nc, proto.CodeUnavailable, "server is draining")
		return
	}
	c.runStd(l, false)
}

// runStd serves c on the calling goroutine until the connection ends, then
// closes it and forgets it. With ending set (a connection handed off by its
// loop with its GoAway written or held), it only writes what is held and
// lingers.
//
// After the peer's FIN it reads nothing more, answers every call it has
// read and lets open streams finish, for at most Options.WriteTimeout,
// writes all of it, and closes (half-close, docs/protocol.md).
func (c *conn) runStd(l *stdLink, ending bool) {
	s := c.s
	defer func() {
		_ = l.nc.Close()
		s.forget(c)
		for _, done := range l.end() {
			done()
		}
	}()
	defer func() {
		if p := recover(); p != nil { // a bug of rpcd's: lose the connection, not the process
			s.log.Error("rpcd: panic serving a connection; closing it", "remote", c.remote, "panic", p, "stack", string(debug.Stack()))
		}
	}()
	out := c.held // what the loop's socket did not take
	c.held = nil
	c.tapSkip = len(out) // the tap saw it when the loop wrote it
	if c.peerDone && !ending {
		c.peerClosed() // handed off at the FIN
	}
	var halfClosed time.Time
	maxBuf := s.opts.Limits.MaxFrameSize
	for {
		acks := l.unpoke()
		action := gnet.None
		if !ending {
			out, action = c.service(l, out)
		}
		out = c.flush(out)
		for _, done := range acks {
			done()
		}
		switch {
		case c.lost || l.shut.Load():
			return
		case ending || action != gnet.None:
			for _, done := range l.end() { // nothing more to do for those who wait
				done()
			}
			c.tapEnd() // nothing more is read or written
			linger.Drain(l.nc, s.opts.LingerTime, s.opts.LingerBytes)
			return
		case c.peerDone:
			if !c.owes() {
				return // all answered and written: the close is the FIN
			}
			if halfClosed.IsZero() {
				// A peer that closed for good sent the same FIN as one
				// that only shut down its write side: a Ping tells them
				// apart, the first answering it with a reset (peerGone).
				halfClosed = time.Now()
				out = c.flush(proto.AppendPing(out, nil))
				continue
			}
			if peerGone(l.nc) {
				return // its calls are cancelled: no one waits for them
			}
			left := s.opts.WriteTimeout - time.Since(halfClosed)
			if left <= 0 {
				s.log.Info("rpcd: closing a half-closed connection with calls or streams still running", "remote", c.remote, "after", s.opts.WriteTimeout)
				return
			}
			l.await(min(left, halfClosedLook))
			continue
		case c.more:
			continue // whole frames left past the high-water mark
		}
		c.inboundLeft = l.InboundBuffered()
		if c.inboundLeft == 0 && c.big == nil {
			c.frameStart.Store(0)
		} else if c.frameStart.Load() == 0 {
			c.frameStart.Store(s.clock.Load())
		}
		if cap(out) > 2*maxBuf {
			out = nil // let a huge reply's buffer go
		}
		n, err := l.in.Fill() // its error as it comes: a poke's deadline, the peer's end
		c.bytesIn.Add(uint64(n))
		if n > 0 {
			c.lastRead.Store(s.clock.Load())
		}
		switch {
		case err == nil || errors.Is(err, os.ErrDeadlineExceeded):
		case errors.Is(err, io.EOF):
			c.peerClosed()
		default:
			if !errors.Is(err, net.ErrClosed) {
				s.log.Debug("rpcd: reading a connection", "remote", c.remote, "err", err)
			}
			return
		}
	}
}

// peerCloser is a connection that knows whether its peer closed it for
// good (a ws.Conn: a WebSocket has no half-close).
type peerCloser interface{ PeerClosed() bool }

// halfClosedLook is how often a half-closed connection with calls still
// running looks whether its peer has closed for good.
const halfClosedLook = 20 * time.Millisecond

// peerClosed acts on the peer's FIN: nothing more will be read, so the
// connection's subscriptions end and the server's calls to the peer fail;
// the calls read are still answered.
func (c *conn) peerClosed() {
	c.peerDone = true
	c.dropSubscriptions()
	c.mu.Lock()
	c.failPeerCalls()
	c.mu.Unlock()
}

// The defaults of the lingering close (linger.Drain): a connection that
// ends on a GoAway reads and discards what its peer still sends for up to
// Options.LingerTime and LingerBytes; one refused at once (past MaxConns,
// while draining) for Options.RefuseLinger, at most MaxRefuseLinger of
// them at a time.
const (
	DefaultLingerTime      = linger.DefaultTime
	DefaultLingerBytes     = linger.DefaultBytes
	DefaultRefuseLinger    = 250 * time.Millisecond
	DefaultMaxRefuseLinger = 1024
)

// writeChunk is the most a connection's goroutine writes under one
// deadline: the peer must take each chunk within Options.WriteTimeout.
const writeChunk = 1 << 20

// writeStd writes out, then own if there is one, on the connection's own
// goroutine. It waits while the peer reads, and reports false once the
// peer has taken no chunk of it for WriteTimeout (the connection is cut,
// a slow consumer) or a write fails.
func (c *conn) writeStd(out, own []byte) bool {
	nc := c.std.Load().nc
	defer c.unread.Store(0)
	for _, b := range [2][]byte{out, own} {
		for len(b) > 0 {
			c.unread.Store(int64(len(b)))
			_ = nc.SetWriteDeadline(time.Now().Add(c.s.opts.WriteTimeout))
			n, err := nc.Write(b[:min(len(b), writeChunk)])
			c.bytesOut.Add(uint64(n))
			b = b[n:]
			if err == nil {
				continue
			}
			if errors.Is(err, os.ErrDeadlineExceeded) && c.ending.Load() == nil {
				c.s.stats.slowConsumers.Add(1)
				c.s.log.Info("rpcd: closing connection: the peer takes none of its output", "remote", c.remote, "for", c.s.opts.WriteTimeout, "unwritten", len(b))
			} else {
				c.s.log.Debug("rpcd: writing to a connection", "remote", c.remote, "err", err)
			}
			return false
		}
	}
	return true
}

// peerIdentity is the identity of a verified client certificate (mutual
// TLS): its subject's common name; nil without one.
func peerIdentity(tc *tls.Conn) *handler.Identity {
	st := tc.ConnectionState()
	if len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return nil
	}
	cert := st.PeerCertificates[0]
	return &handler.Identity{Subject: cert.Subject.CommonName, Method: "tls", Roles: cert.Subject.OrganizationalUnit}
}
