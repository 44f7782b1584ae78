//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package client

import (
	"io"
	"net"
)

// rawWriter is not built here: every write goes through net.Conn.
type rawWriter struct{}

// newRawWriter returns nil: here every write goes through net.Conn.
func newRawWriter(net.Conn) *rawWriter { return nil }

// writeNow is never called: newRawWriter gives no writer.
func (*rawWriter) writeNow([]byte) (int, error) { return 0, nil }

// newRawReader returns nil: here every read goes through net.Conn.
func newRawReader(net.Conn) io.Reader { return nil }
