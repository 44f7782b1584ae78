//go:build !linux

package load

import "net"

// rawIO is Linux's (rawio_linux.go); elsewhere the wire driver reads and
// writes through net.Conn.
type rawIO struct{}

func newRawIO(net.Conn) *rawIO { return nil }

func (*rawIO) readLoop(func() []byte, func(int) error) error { panic("unreachable") }

func (*rawIO) write([]byte) error { panic("unreachable") }

func (*rawIO) shutdown() { panic("unreachable") }

func (*rawIO) dup() (int, error) { panic("unreachable") }

func writeFd(int, []byte) error { panic("unreachable") }
