package transport

import "net"

// Tap sees the frames of the connections a server serves, whole and as on the wire, for a
// recording. Its methods run on the goroutine that reads or writes the connection (an event
// loop): they must not block, must not keep frame past the call (copy what is kept), and must
// be safe for concurrent use from several loops.
type Tap interface {
	// TapOpen is called the first time a connection is seen after the tap was set: before its
	// first frame from then on. conn is a number unique among the server's connections for the
	// server's life; remote its peer's address. It returns false for a connection not to be
	// recorded (the tap samples by connection): no more calls come for that conn.
	TapOpen(conn uint64, remote net.Addr) bool
	// TapFrame is a whole frame (24-byte header, route, metadata, payload, as protocol.md lays
	// it out; a compressed payload still compressed) that conn received (out false) or sent
	// (out true).
	TapFrame(conn uint64, out bool, frame []byte)
	// TapClose is called once when a connection TapOpen accepted closes, or when the tap is
	// replaced or removed while the connection is open (the recording ends).
	TapClose(conn uint64)
}
