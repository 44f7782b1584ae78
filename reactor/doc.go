// Package reactor serves a handler.Registry over TCP (or a Unix socket) on
// gnet event loops: epoll on Linux, kqueue on macOS and the BSDs. It is the
// only package of rpcd that imports gnet. On Windows, over TLS and with
// Options.StdTransport it serves on the standard library transport instead,
// a goroutine per connection (std.go), as it does connections given to
// ServeConn and those that leave their loop.
//
// Each event loop owns its connections. When a loop wakes with bytes for a
// connection, it parses every whole frame straight from gnet's input buffer,
// runs inline handlers on the loop with the payload read in place, appends
// every reply of that wake-up to one buffer, and writes it with one call:
// one write syscall per wake-up, not one per reply, and no allocation per
// call on the raw path. Routes registered with handler.Blocking run on a
// bounded goroutine pool instead; their replies go back through the loop,
// batched the same way.
//
// Large frames (64 KiB and more) take another way: a frame still arriving is
// gathered in a buffer of its own, read straight from the socket once gnet's
// input is taken, and a large reply the handler returns from a slice of its
// own (an echo returns its request) is written from there, after the
// replies before it, in one writev: a megabyte is not copied on the way in
// or out.
//
// Shutdown drains: it refuses new connections, sends GoAway on every
// connection naming the last call it will answer, answers the calls in
// flight, flushes, and only then stops gnet. With Options.MaxConnAge, a
// connection past its age gets the same GoAway on its own, so that a
// client behind an L4 balancer dials again and may reach another server.
package reactor
