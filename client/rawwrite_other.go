//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package client

import (
	"net"
	"syscall"
)

// rawConn returns nil: here every write goes through net.Conn.
func rawConn(net.Conn) syscall.RawConn { return nil }

// writeNow is not called where rawConn is nil.
func writeNow(syscall.RawConn, []byte) (int, error) { return 0, nil }
