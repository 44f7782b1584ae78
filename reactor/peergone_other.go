//go:build !linux

package reactor

import "net"

// peerGone reports whether the peer of a connection that has sent its FIN
// has closed for good. Off Linux it cannot tell until a write fails.
func peerGone(net.Conn) bool { return false }
