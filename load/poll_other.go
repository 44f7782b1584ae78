//go:build !linux

package load

import "net"

// poller is Linux's (poll_linux.go); elsewhere a pacer ticks and each
// connection's goroutine reads it.
type poller struct{}

func newPollers(int) []*poller { return nil }

func (c *wireConn) handOver(*poller, net.Conn, *rawIO) error { panic("unreachable") }

func (d *wireDriver) poll(int) { panic("unreachable") }

func (c *wireConn) shutdownLocked() { panic("unreachable") }
