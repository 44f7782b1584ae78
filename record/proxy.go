package record

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/proto"
)

// DefaultDialTimeout bounds the proxy's dial of the server for each
// connection it accepts.
const DefaultDialTimeout = 5 * time.Second

// Proxy records the traffic between clients and a server it cannot touch:
// it accepts connections, dials the server for each, copies the bytes both
// ways unchanged, and gives each direction's whole frames to a Recorder.
// A direction whose bytes do not parse as frames ends the recording of its
// connection, not its traffic.
type Proxy struct {
	to          string
	rec         *Recorder
	limits      proto.Limits
	DialTimeout time.Duration // 0: DefaultDialTimeout

	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
	next   atomic.Uint64 // the last connection number given
}

// NewProxy returns a proxy to the server at address to that records into
// rec. Serve starts it.
func NewProxy(to string, rec *Recorder) *Proxy {
	return &Proxy{to: to, rec: rec, limits: proto.Limits{}.WithDefaults(), conns: map[net.Conn]struct{}{}}
}

// Serve accepts connections on ln until Close, and returns nil then; or
// the error that stopped it accepting.
func (p *Proxy) Serve(ln net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		ln.Close()
		return nil
	}
	p.ln = ln
	p.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return errorf("proxy: %w", err)
		}
		if !p.add(c) {
			c.Close()
			return nil
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// Close stops accepting, closes every connection and waits for their
// goroutines. The Recorder is the caller's to stop.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	var err error
	if p.ln != nil {
		err = p.ln.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// add enrols c, unless the proxy is closed.
func (p *Proxy) add(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) forget(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// tapped is one proxied connection's recording: the two directions' tap
// calls, and the close that ends them, under one lock, so that no frame
// follows TapClose.
type tapped struct {
	rec  *Recorder
	conn uint64
	mu   sync.Mutex
	on   bool
}

func (t *tapped) frame(out bool, f []byte) {
	t.mu.Lock()
	if t.on {
		t.rec.TapFrame(t.conn, out, f)
	}
	t.mu.Unlock()
}

func (t *tapped) close() {
	t.mu.Lock()
	if t.on {
		t.on = false
		t.rec.TapClose(t.conn)
	}
	t.mu.Unlock()
}

// serve proxies one client connection.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.forget(client)
	timeout := p.DialTimeout
	if timeout <= 0 {
		timeout = DefaultDialTimeout
	}
	server, err := net.DialTimeout("tcp", p.to, timeout)
	if err != nil || !p.add(server) {
		if server != nil {
			server.Close()
		}
		return
	}
	defer p.forget(server)
	conn := p.next.Add(1)
	t := &tapped{rec: p.rec, conn: conn, on: p.rec.TapOpen(conn, client.RemoteAddr())}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.pipe(server, client, t, false)
	}()
	p.pipe(client, server, t, true)
	wg.Wait()
	t.close()
}

// pipe copies src to dst unchanged, giving the whole frames it sees to t
// before it writes them on (so that an answer is never tapped before its
// call). At src's end it shuts down dst's write side; on an error it
// closes both.
func (p *Proxy) pipe(dst, src net.Conn, t *tapped, out bool) {
	buf := make([]byte, 64<<10)
	var pending []byte // a frame's start, waiting for its rest
	parse := t.on
	for {
		n, err := src.Read(buf)
		if n > 0 && parse {
			if pending, parse = p.frames(t, out, pending, buf[:n]); !parse {
				t.close()
				pending = nil
			}
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				src.Close()
				dst.Close()
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if tc, ok := dst.(interface{ CloseWrite() error }); ok {
					tc.CloseWrite()
					return
				}
			}
			src.Close()
			dst.Close()
			return
		}
	}
}

// frames taps the whole frames of pending followed by b, and returns what
// is left of a frame not yet whole, and false once the bytes do not parse.
func (p *Proxy) frames(t *tapped, out bool, pending, b []byte) ([]byte, bool) {
	if len(pending) > 0 {
		pending = append(pending, b...)
		b = pending
	}
	var f proto.Frame
	for len(b) > 0 {
		n, err := f.Decode(b, &p.limits)
		if err != nil {
			return nil, false
		}
		if n == 0 {
			break
		}
		t.frame(out, b[:n])
		b = b[n:]
	}
	// Keep the rest in pending's own storage (b may be a view into it, or
	// into the read buffer).
	return append(pending[:0], b...), true
}

// RunProxy records the traffic to the server at address to of the clients
// that connect to listen, into a new file at path, until ctx ends or the
// recording does (Options' Duration or MaxBytes), and returns the
// recording's figures. ready, if not nil, is called with the address the
// proxy listens on once it does.
func RunProxy(ctx context.Context, listen, to, path string, o Options, ready func(net.Addr)) (Stats, error) {
	o.Source, o.Server = "proxy", to
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return Stats{}, errorf("proxy: %w", err)
	}
	rec, err := Create(path, o)
	if err != nil {
		ln.Close()
		return Stats{}, err
	}
	p := NewProxy(to, rec)
	served := make(chan error, 1)
	go func() { served <- p.Serve(ln) }()
	if ready != nil {
		ready(ln.Addr())
	}
	stopped := false // Serve has returned
	select {
	case <-ctx.Done():
	case <-rec.Done():
	case err = <-served:
		stopped = true
	}
	cerr := p.Close()
	if !stopped {
		err = <-served
	}
	s, serr := rec.Stop()
	return s, errors.Join(err, serr, ignoreClosed(cerr))
}

// ignoreClosed drops the error of closing a listener already closed.
func ignoreClosed(err error) error {
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
