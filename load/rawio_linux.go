//go:build linux

package load

import (
	"io"
	"net"
	"syscall"
	"unsafe"
)

// rawIO reads and writes a socket with raw system calls, which skip the Go
// scheduler's bookkeeping around a system call: a non-blocking socket's
// read or write never blocks, and a read that finds nothing waits in the
// network poller as net.Conn's does. Without it the wire driver spent more
// CPU per call than the server it loaded: each wake-up of the load process
// from idle woke the runtime's sysmon thread at its first system call (5.5 %
// of the driver's samples at 1 × 128, and sysmon's sleeps 5.7 % more).
type rawIO struct {
	rc syscall.RawConn

	// The reader's and the writer's, who may be two goroutines.
	rbuf   []byte
	n      int
	rerrno syscall.Errno
	wbuf   []byte
	werrno syscall.Errno

	readFn, writeFn func(fd uintptr) bool
}

// newRawIO returns the raw I/O of nc, or nil if nc is not a plain socket
// (TLS, a test's pipe): its callers then use nc itself.
func newRawIO(nc net.Conn) *rawIO {
	sc, ok := nc.(interface {
		SyscallConn() (syscall.RawConn, error)
	})
	if !ok {
		return nil
	}
	switch nc.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		return nil // a wrapper's SyscallConn: its bytes are not the socket's
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	r := &rawIO{rc: rc}
	r.readFn = func(fd uintptr) bool {
		for {
			n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&r.rbuf[0])), uintptr(len(r.rbuf)))
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait in the poller
			}
			r.n, r.rerrno = int(n), e
			if e != 0 {
				r.n = 0
			}
			return true
		}
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

// read reads into b, waiting for bytes if there are none; one goroutine
// at a time reads.
func (r *rawIO) read(b []byte) (int, error) {
	r.rbuf, r.n, r.rerrno = b, 0, 0
	err := r.rc.Read(r.readFn)
	r.rbuf = nil
	switch {
	case err != nil:
		return 0, err
	case r.rerrno != 0:
		return 0, r.rerrno
	case r.n == 0:
		return 0, io.EOF
	}
	return r.n, nil
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
