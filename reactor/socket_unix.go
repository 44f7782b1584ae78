//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package reactor

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// The system calls a loop's connection makes on its socket itself: the
// rest of a large frame read straight into its buffer (engine.go,
// readBig) and a wake-up's output written without gnet's buffer
// (write.go). They are built for the systems gnet runs event loops on,
// the same as its own: epoll on Linux, kqueue on macOS and the BSDs. On
// Windows no connection is on a loop (socket_windows.go).

// readSocket reads into b from the non-blocking socket fd.
func readSocket(fd int, b []byte) (int, error) { return syscall.Read(fd, b) }

// writeSocket writes a and then b to the non-blocking socket fd until it
// would block, and returns how many bytes it took.
func writeSocket(fd int, a, b []byte) (int, error) {
	n, total := 0, len(a)+len(b)
	for n < total {
		var m int
		var err error
		switch {
		case n < len(a) && len(b) > 0:
			m, err = writev(fd, [][]byte{a[n:], b})
		case n < len(a):
			m, err = unix.Write(fd, a[n:])
		default:
			m, err = unix.Write(fd, b[n-len(a):])
		}
		n += max(m, 0)
		switch err {
		case nil:
		case unix.EINTR:
		case unix.EAGAIN:
			return n, nil
		default:
			return n, err
		}
	}
	return n, nil
}
