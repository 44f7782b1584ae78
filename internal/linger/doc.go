// Package linger is the lingering close, shared by the server's
// connections (reactor) and its WebSockets (ws): a connection whose last
// words (a GoAway, a WebSocket's close message) must reach a peer that may
// still be sending shuts down its write side and reads and discards what
// the peer sends, for a while, before it is closed. Closing a socket with
// bytes unread makes the kernel reset the connection, and a reset destroys
// what the peer has not read yet: those last words. The limits come from
// the caller's options (reactor.Options, ws.Options), whose defaults are
// DefaultTime and DefaultBytes.
package linger
