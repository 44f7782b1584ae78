package reactor

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// The standard library transport serves the same protocol, with the same
// registry, limits and shutdown, on a goroutine per connection over any
// net.Conn: it is how rpcd serves TLS, which gnet's loops cannot (they see
// the socket's bytes, and TLS needs crypto/tls between them and the
// frames). Each connection's goroutine reads into a buffer of its own,
// runs the frames the way an event loop does (readFrames, handleFrame) and
// writes the replies of each read with one Write.

// stdLink is a connection's input buffer and its hand-offs, for the
// transport's goroutine.
type stdLink struct {
	nc  net.Conn
	buf []byte
	r   int // read position in buf
	w   int // write position in buf

	mu    sync.Mutex
	acks  []func() // to call after the next service pass
	poked bool
	ended bool // the goroutine has returned: nothing will call acks
}

// Peek implements inbound.
func (l *stdLink) Peek(n int) ([]byte, error) {
	if n <= 0 {
		return l.buf[l.r:l.w], nil
	}
	if l.w-l.r < n {
		return nil, io.ErrShortBuffer
	}
	return l.buf[l.r : l.r+n], nil
}

// Discard implements inbound.
func (l *stdLink) Discard(n int) (int, error) {
	n = min(n, l.w-l.r)
	l.r += n
	if l.r == l.w {
		l.r, l.w = 0, 0
	}
	return n, nil
}

// InboundBuffered implements inbound.
func (l *stdLink) InboundBuffered() int { return l.w - l.r }

// fill reads more bytes into the buffer, making room first: it moves what
// is left to the front, and grows the buffer up to max when the frame
// waiting needs more.
func (l *stdLink) fill(max int) (int, error) {
	if l.w == len(l.buf) {
		if l.r > 0 {
			l.w = copy(l.buf, l.buf[l.r:l.w])
			l.r = 0
		} else if len(l.buf) < max {
			grown := make([]byte, min(2*len(l.buf), max))
			copy(grown, l.buf[:l.w])
			l.buf = grown
		}
	}
	if l.w == len(l.buf) { // cannot happen: frames past 64 KiB are gathered apart
		return 0, errors.New("rpcd: input buffer full")
	}
	return l.nc.Read(l.buf[l.w:])
}

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

// serveStd serves one connection on the calling goroutine until it ends.
func (s *Server) serveStd(nc net.Conn) {
	defer s.stdConns.Done()
	defer nc.Close()
	var id *handler.Identity
	if tc, ok := nc.(*tls.Conn); ok {
		_ = tc.SetDeadline(time.Now().Add(s.opts.HandshakeTimeout))
		if err := tc.Handshake(); err != nil {
			s.log.Info("rpcd: TLS handshake failed", "remote", nc.RemoteAddr(), "err", err)
			return
		}
		_ = tc.SetDeadline(time.Time{})
		id = peerIdentity(tc)
	}
	switch {
	case s.draining.Load():
		s.refuse(nc, proto.CodeUnavailable, "server is draining")
		return
	case s.nconns.Load() >= int64(s.opts.MaxConns):
		s.refuse(nc, proto.CodeResourceExhausted, "too many connections")
		return
	}
	l := &stdLink{nc: nc, buf: make([]byte, 64<<10)}
	c := newConn(s, nil, nc.RemoteAddr())
	c.std = l
	if id != nil && s.opts.Authenticator == nil {
		c.identity, c.call.Identity = id, id // a verified client certificate
		c.peer.identity.Store(id)
	}
	s.enrol(c)
	defer func() {
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

	maxBuf := s.opts.Limits.MaxFrameSize
	var out []byte
	for {
		acks := l.unpoke()
		var end bool
		out, end = c.serviceStd(out[:0])
		if len(out) > 0 && !c.writeStd(out, nil) {
			end = true
		}
		for _, done := range acks {
			done()
		}
		if end {
			return
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
		n, err := l.fill(maxBuf)
		l.w += n
		c.bytesIn.Add(uint64(n))
		if n > 0 {
			c.lastRead.Store(s.clock.Load())
		}
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.log.Debug("rpcd: reading a connection", "remote", c.remote, "err", err)
			}
			return
		}
	}
}

// writeStd writes out, then own if there is one, within WriteTimeout; it
// reports false if the write failed, which ends the connection.
func (c *conn) writeStd(out, own []byte) bool {
	nc := c.std.nc
	_ = nc.SetWriteDeadline(time.Now().Add(c.s.opts.WriteTimeout))
	c.bytesOut.Add(uint64(len(out) + len(own)))
	_, err := nc.Write(out)
	if err == nil && own != nil {
		_, err = nc.Write(own)
	}
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) && c.ending.Load() == nil {
			c.s.stats.slowConsumers.Add(1) // unread replies for WriteTimeout
		}
		c.s.log.Debug("rpcd: writing to a connection", "remote", c.remote, "err", err)
		return false
	}
	return true
}

// serviceStd is a wake-up's work on the standard library transport.
func (c *conn) serviceStd(out []byte) ([]byte, bool) {
	out, action := c.service(c.std, out)
	return out, action != 0
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
