//go:build linux

package load

import (
	"errors"
	"io"
	"net"
	"syscall"
	"time"
	"unsafe"

	"github.com/rpcd/rpcd/internal/epoll"
)

// rawIO reads and writes a socket with raw system calls, which skip the Go
// scheduler's bookkeeping around a system call: a non-blocking socket's
// read or write never blocks, and a read that finds nothing waits in the
// network poller as net.Conn's does. Without it the wire driver spent more
// CPU per call than the server it loaded: each wake-up of the load process
// from idle woke the runtime's sysmon thread at its first system call (5.5 %
// of the driver's samples at 1 × 128, and sysmon's sleeps 5.7 % more).
//
// Its reads, all within one raw read, wait only where the poller says the
// socket has nothing: it reads until EAGAIN, not only until a read returns
// less than the room it was given. A short read has emptied the receive
// queue of bytes, but not of the end or error that came with them: the
// runtime's poller is edge-triggered, and a server's close that came in
// with its last reply, before the reader woke, raises no edge of its own
// once the reply is read. A reader that waited then would wait for good
// (load's TestReadLoopSeesEndWithLastBytes). The pacers' epoll instances
// are level-triggered (poll_linux.go): there a short read may end a turn.
type rawIO struct {
	rc syscall.RawConn

	// The reader's (readLoop's): where to read, what to do with it, and
	// how the loop ended.
	room   func() []byte
	got    func(n int) error
	rerr   error
	readFn func(fd uintptr) bool

	// The writer's (one at a time: the connection's lock).
	wbuf    []byte
	werrno  syscall.Errno
	writeFn func(fd uintptr) bool
}

// newRawIO returns the raw I/O of nc, or nil if nc is not a plain socket
// (TLS, a test's pipe): its callers then use nc itself.
func newRawIO(nc net.Conn) *rawIO {
	switch nc.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		return nil // a wrapper's bytes are not the socket's
	}
	rc, err := nc.(syscall.Conn).SyscallConn()
	if err != nil {
		return nil
	}
	r := &rawIO{rc: rc}
	r.readFn = func(fd uintptr) bool {
		r.rerr = drain(fd, r.room, r.got, false)
		return r.rerr != errWait
	}
	r.writeFn = func(fd uintptr) bool {
		for len(r.wbuf) > 0 {
			n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&r.wbuf[0])), uintptr(len(r.wbuf)))
			switch e {
			case 0:
				r.wbuf = r.wbuf[n:]
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false // wait for room
			default:
				r.werrno = e
				return true
			}
		}
		return true
	}
	return r
}

// errWait is drain's word that fd's receive queue is empty.
var errWait = errors.New("wait for the next edge")

// drain reads fd until its receive queue is empty, each read into room()
// and its n bytes handed to got, and returns errWait; or the error that
// ended it: the read's, io.EOF, or got's. Under a level-triggered poller
// (level), a read that returns less than its room ends it: the queue is
// empty of bytes, and an end or error still in it keeps the socket
// readable for the next wait. Under an edge-triggered one it reads until
// EAGAIN (see rawIO).
func drain(fd uintptr, room func() []byte, got func(n int) error, level bool) error {
	for {
		b := room()
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch {
		case e == syscall.EINTR:
			continue
		case e == syscall.EAGAIN:
			return errWait
		case e != 0:
			return e
		case n == 0:
			return io.EOF
		}
		if err := got(int(n)); err != nil {
			return err
		}
		if level && int(n) < len(b) {
			return errWait
		}
	}
}

// readLoop reads the socket until it fails or got returns an error, which
// it returns: each read into room(), its n bytes handed to got. One
// goroutine reads.
func (r *rawIO) readLoop(room func() []byte, got func(n int) error) error {
	r.room, r.got, r.rerr = room, got, nil
	err := r.rc.Read(r.readFn)
	r.room, r.got = nil, nil
	if err != nil {
		return err
	}
	return r.rerr
}

// write writes all of b, waiting for room when the socket has none; one
// goroutine at a time writes (the connection's lock).
func (r *rawIO) write(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	r.wbuf, r.werrno = b, 0
	err := r.rc.Write(r.writeFn)
	r.wbuf = nil
	if err != nil {
		return err
	}
	if r.werrno != 0 {
		return r.werrno
	}
	return nil
}

// shutdown ends the socket both ways without closing its descriptor: a
// reader finds its end, a writer waiting for room wakes to an error, and
// the descriptor stays the socket's until the net.Conn is closed.
func (r *rawIO) shutdown() {
	_ = r.rc.Control(func(s uintptr) { _ = syscall.Shutdown(int(s), syscall.SHUT_RDWR) })
}

// dup returns a new descriptor of the socket, close-on-exec and
// non-blocking, which stays the socket's after nc is closed: closing nc
// takes the socket out of the runtime's poller, and the duplicate's owner
// reads and writes it raw.
func (r *rawIO) dup() (int, error) { return epoll.Dup(r.rc) }

// writeFd writes all of b to fd, a non-blocking socket outside the
// runtime's poller, waiting in ppoll for room when it has none, until it
// has some or is shut down. The wire driver's requests are small enough
// (wireMaxPayload) that it rarely waits.
func writeFd(fd int, b []byte) error {
	_, err := epoll.Write(fd, b, time.Time{})
	return err
}
