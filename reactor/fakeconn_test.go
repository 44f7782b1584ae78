package reactor

import (
	"io"
	"net"

	"github.com/panjf2000/gnet/v2"
)

// fakeConn is a gnet.Conn over a byte slice, for driving OnTraffic without
// sockets. It records every Write.
type fakeConn struct {
	gnet.Conn // methods not overridden panic (nil interface)
	in        []byte
	writes    [][]byte
	ctx       any

	sock     int   // Fd's socket, if hasSock: input past in is read from it (Dup: traffic_socket_test.go)
	hasSock  bool  // Fd is sock, not -1
	writeErr error // what Write and Writev fail with, if set
	writevs  int   // the writes that came through Writev
}

// EventLoop is nil: a fake connection is on no loop (its watch is its
// own: Server.loopWatchOf).
func (f *fakeConn) EventLoop() gnet.EventLoop { return nil }

func (f *fakeConn) Peek(n int) ([]byte, error) {
	if n <= 0 {
		n = len(f.in)
	}
	if n > len(f.in) {
		return nil, io.ErrShortBuffer
	}
	return f.in[:n], nil
}

func (f *fakeConn) Discard(n int) (int, error) {
	if n > len(f.in) {
		n = len(f.in)
	}
	f.in = f.in[n:]
	return n, nil
}

func (f *fakeConn) InboundBuffered() int  { return len(f.in) }
func (f *fakeConn) OutboundBuffered() int { return 0 }

func (f *fakeConn) Write(b []byte) (int, error) {
	if f.writeErr != nil {
		return 0, f.writeErr
	}
	f.writes = append(f.writes, append([]byte(nil), b...))
	return len(b), nil
}

// Writev records the buffers as one write, as one writev would send them.
func (f *fakeConn) Writev(bs [][]byte) (int, error) {
	if f.writeErr != nil {
		return 0, f.writeErr
	}
	f.writevs++
	var b []byte
	for _, p := range bs {
		b = append(b, p...)
	}
	f.writes = append(f.writes, b)
	return len(b), nil
}

// Fd is the socket's given, else -1: none.
func (f *fakeConn) Fd() int {
	if !f.hasSock {
		return -1
	}
	return f.sock
}

func (f *fakeConn) Context() any         { return f.ctx }
func (f *fakeConn) SetContext(ctx any)   { f.ctx = ctx }
func (f *fakeConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5555} }
