package proto

import "time"

// Defaults that both ends of a connection take for a zero setting: the
// server's reactor.Options and the client's client.Options share them.
const (
	// DefaultKeepAlive is how long a connection may be silent before its
	// end sends a Ping.
	DefaultKeepAlive = 30 * time.Second
	// DefaultKeepAliveTimeout is how long an end waits, after a
	// keep-alive Ping, for any frame before it gives the connection up.
	DefaultKeepAliveTimeout = 10 * time.Second
	// DefaultCompressMin is the smallest payload compressed, in bytes,
	// on a connection that compresses (docs/protocol.md, "Compression").
	DefaultCompressMin = 1 << 10
)
