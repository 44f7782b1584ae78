package linger

import (
	"crypto/tls"
	"io"
	"net"
	"time"
)

// The limits of a lingering close that its caller's options default to:
// how long, and how many bytes, it reads and discards at most.
const (
	DefaultTime  = 2 * time.Second
	DefaultBytes = 4 << 20
)

// notifyTimeout bounds the write of a TLS connection's close_notify.
const notifyTimeout = time.Second

// Drain ends nc whose last output is written: it shuts down its write
// side, so that the peer reads that output and then the end (a TLS
// connection sends its close_notify first, within a second), and reads and
// discards what the peer still sends until the peer closes, for at most d
// and n bytes. A connection whose write side cannot be shut down on its
// own (no CloseWrite, as a net.Pipe's) is left as it is. The caller closes
// nc.
func Drain(nc net.Conn, d time.Duration, n int) {
	if tc, ok := nc.(*tls.Conn); ok {
		_ = tc.SetWriteDeadline(time.Now().Add(notifyTimeout))
		_ = tc.CloseWrite() // a close_notify
		nc = tc.NetConn()
	}
	cw, ok := nc.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	_ = nc.SetReadDeadline(time.Now().Add(d))
	_, _ = io.CopyN(io.Discard, nc, int64(n))
}
