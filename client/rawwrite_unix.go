//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package client

import (
	"errors"
	"net"
	"syscall"
)

// rawConn returns nc's raw connection, for writes that must not wait: nil
// for a connection that has none (TLS, a WebSocket, a test's pipe).
func rawConn(nc net.Conn) syscall.RawConn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// writeNow writes b to rc's socket until the socket would block, without
// waiting: it returns how many bytes it took, and an error only for a
// connection that failed.
func writeNow(rc syscall.RawConn, b []byte) (int, error) {
	n := 0
	var werr error
	err := rc.Write(func(fd uintptr) bool {
		for n < len(b) {
			m, err := syscall.Write(int(fd), b[n:])
			switch {
			case err == syscall.EINTR:
				continue
			case err == syscall.EAGAIN:
				return true
			case err != nil:
				werr = err
				return true
			}
			n += m
		}
		return true
	})
	if err == nil {
		err = werr
	}
	if errors.Is(err, syscall.EAGAIN) {
		err = nil
	}
	return n, err
}
