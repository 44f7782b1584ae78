//go:build !linux

package reactor

import "net"

// peerGone reports whether the peer of a connection that has sent its FIN
// has closed for good. Off Linux it cannot tell a TCP peer's until a write
// fails.
func peerGone(nc net.Conn) bool {
	pc, ok := nc.(peerCloser) // a WebSocket: no half-close
	return ok && pc.PeerClosed()
}
