package reactor

import (
	"crypto/tls"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerGone reports whether the peer of a TCP connection that has sent its
// FIN has closed for good: the probe written after the FIN (a Ping) drew a
// reset, and the socket is closed. A peer that only shut down its write
// side took the Ping, and the socket stays open.
func peerGone(nc net.Conn) bool {
	if pc, ok := nc.(peerCloser); ok { // a WebSocket: no half-close
		return pc.PeerClosed()
	}
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	gone := false
	_ = rc.Control(func(fd uintptr) {
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		gone = err == nil && info.State == unix.BPF_TCP_CLOSE
	})
	return gone
}
