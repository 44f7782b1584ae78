//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package reactor

import (
	"bytes"
	"errors"
	"syscall"
	"testing"

	"github.com/panjf2000/gnet/v2"

	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
)

// The loop's own reads and writes on a socket (socket_unix.go), with a
// Unix socket pair behind the test's connection; on Windows no connection
// is on a loop.

// socketPair returns a connected pair of non-blocking Unix stream sockets,
// made the way every Unix system can (SOCK_NONBLOCK is Linux's and
// FreeBSD's, not macOS's).
func socketPair(t *testing.T) [2]int {
	t.Helper()
	syscall.ForkLock.RLock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if err := syscall.SetNonblock(fd, true); err != nil {
			t.Fatal(err)
		}
	}
	return fds
}

// Dup duplicates the socket given, for a connection that leaves its loop.
func (f *fakeConn) Dup() (int, error) {
	if !f.hasSock {
		return -1, syscall.EBADF
	}
	return syscall.Dup(f.sock)
}

// TestBigFrameReadFromSocket: once gnet's input is taken, the rest of a
// large frame is read straight from the socket in the same wake-up, and
// nothing past the frame's end: the frame after it stays in the socket for
// gnet. The echo's reply goes straight to the socket, the payload from the
// request's buffer.
func TestBigFrameReadFromSocket(t *testing.T) {
	s, fc := newTestServer(t)
	fds := socketPair(t)
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	for _, fd := range fds { // room for the frame and its echo (the BSDs count the receiver's buffer too)
		_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_SNDBUF, 1<<20)
		_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1<<20)
	}
	fc.sock, fc.hasSock = fds[0], true

	payload := make([]byte, 2*bigFrame+5)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	big := proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, builtin.EchoPacket, nil, payload)
	next := proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 2}, builtin.EchoPacket, nil, []byte("next"))
	const first = 50000 // what gnet has read; the rest is in the socket
	fc.in = append(fc.in, big[:first]...)
	rest := append(append([]byte(nil), big[first:]...), next...)
	if n, err := syscall.Write(fds[1], rest); n != len(rest) || err != nil {
		t.Fatalf("writing the rest into the socket: %d of %d bytes, %v", n, len(rest), err)
	}

	if action := s.ev.OnTraffic(fc); action != 0 {
		t.Fatalf("action %v", action)
	}
	if fs := decodeAll(t, socketHolds(t, fds[1])); len(fs) != 1 || fs[0].ID != 1 || !bytes.Equal(fs[0].Payload, payload) {
		t.Fatalf("reply to the large frame: %d frames, want its echo", len(fs))
	}
	if left := socketHolds(t, fds[0]); !bytes.Equal(left, next) {
		t.Fatalf("left in the socket: %d bytes; want the next frame's %d", len(left), len(next))
	}
	fc.in = append(fc.in, next...)
	if action := s.ev.OnTraffic(fc); action != 0 {
		t.Fatalf("the next frame: action %v", action)
	}
	if fs := decodeAll(t, socketHolds(t, fds[1])); len(fs) != 1 || !bytes.Equal(fs[0].Payload, []byte("next")) {
		t.Fatalf("the next frame answered with %+v", fs)
	}
	st := s.Stats()
	if in := uint64(len(big) + len(next)); st.BytesIn != in {
		t.Fatalf("%d bytes in counted, want %d", st.BytesIn, in)
	}
	if out := uint64(2*proto.HeaderSize + len(payload) + len("next")); st.BytesOut != out {
		t.Fatalf("%d bytes out counted, want %d", st.BytesOut, out)
	}
}

// socketHolds reads what the non-blocking socket fd holds now.
func socketHolds(t *testing.T, fd int) []byte {
	t.Helper()
	var got []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := syscall.Read(fd, buf)
		if err == syscall.EAGAIN {
			return got
		}
		if err != nil || n == 0 {
			t.Fatalf("reading the socket: %d, %v", n, err)
		}
		got = append(got, buf[:n]...)
	}
}

// TestBigFrameSocketEnds: a peer that hangs up inside a large frame, or a
// failed write of a large reply, ends the connection.
func TestBigFrameSocketEnds(t *testing.T) {
	frame := proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, builtin.EchoPacket, nil, make([]byte, 2*bigFrame))

	s, fc := newTestServer(t)
	fds := socketPair(t)
	defer syscall.Close(fds[0])
	fc.sock, fc.hasSock = fds[0], true
	fc.in = append(fc.in, frame[:bigFrame]...)
	if action := s.ev.OnTraffic(fc); action != 0 {
		t.Fatalf("action %v with the rest of the frame still to come", action)
	}
	syscall.Close(fds[1])
	if action := s.ev.OnTraffic(fc); action != gnet.Close {
		t.Fatalf("action %v after the peer hung up inside a frame, want Close", action)
	}

	s, fc = newTestServer(t)
	fc.writeErr = errors.New("broken pipe")
	fc.in = append(fc.in, frame...)
	if action := s.ev.OnTraffic(fc); action != gnet.Close {
		t.Fatalf("action %v after the large reply's write failed, want Close", action)
	}
}
