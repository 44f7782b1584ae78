//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package client

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// rawConn returns nc's raw connection; nil for a connection that is no
// plain socket (TLS, a WebSocket, a test's pipe), whose bytes are not the
// socket's.
func rawConn(nc net.Conn) syscall.RawConn {
	switch nc.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		return nil
	}
	rc, err := nc.(syscall.Conn).SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// rawWriter writes a socket with raw system calls, as far as it takes
// them without waiting: for the end of a batch, on the reading goroutine,
// which must never wait for the socket.
type rawWriter struct {
	rc   syscall.RawConn
	b    []byte
	n    int
	errn syscall.Errno
	fn   func(fd uintptr) bool
}

// newRawWriter returns a raw writer of nc's socket; nil if it has none.
func newRawWriter(nc net.Conn) *rawWriter {
	rc := rawConn(nc)
	if rc == nil {
		return nil
	}
	w := &rawWriter{rc: rc}
	w.fn = func(fd uintptr) bool {
		for w.n < len(w.b) {
			m, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&w.b[w.n])), uintptr(len(w.b)-w.n))
			switch e {
			case 0:
				w.n += int(m)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return true // the rest is the writer goroutine's
			default:
				w.errn = e
				return true
			}
		}
		return true
	}
	return w
}

// writeNow writes b as far as the socket takes it without waiting, and
// returns how many bytes it took; an error only for a connection that
// failed.
func (w *rawWriter) writeNow(b []byte) (int, error) {
	w.b, w.n, w.errn = b, 0, 0
	err := w.rc.Write(w.fn)
	n := w.n
	w.b = nil
	if err == nil && w.errn != 0 {
		err = os.NewSyscallError("write", w.errn)
	}
	return n, err
}

// rawReader reads a socket with raw system calls: a read that finds
// nothing waits in the network poller, as net.Conn's does, and the
// deadlines set on the connection hold; but no read enters the Go
// scheduler's system call bookkeeping, whose first use after the process
// was idle wakes the runtime's sysmon thread (a tenth of a load
// generator's CPU, measured in package load).
type rawReader struct {
	rc   syscall.RawConn
	p    []byte
	n    int
	errn syscall.Errno
	fn   func(fd uintptr) bool
}

// newRawReader returns a raw reader of nc's socket; nil for a connection
// that is no plain socket (TLS, a WebSocket, a test's pipe).
func newRawReader(nc net.Conn) io.Reader {
	rc := rawConn(nc)
	if rc == nil {
		return nil
	}
	r := &rawReader{rc: rc}
	r.fn = func(fd uintptr) bool {
		for {
			m, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&r.p[0])), uintptr(len(r.p)))
			switch e {
			case 0:
				r.n, r.errn = int(m), 0
				return true
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait for the poller's word
			default:
				r.n, r.errn = 0, e
				return true
			}
		}
	}
	return r
}

func (r *rawReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.p = p
	err := r.rc.Read(r.fn)
	r.p = nil
	switch {
	case err != nil:
		return 0, err // a deadline passed, or the connection is closed
	case r.errn != 0:
		return 0, os.NewSyscallError("read", r.errn)
	case r.n == 0:
		return 0, io.EOF
	}
	return r.n, nil
}
