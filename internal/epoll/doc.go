// Package epoll is an epoll instance that a goroutine waits on without
// blocking a thread, and the raw calls on the sockets such an instance
// watches, outside the Go runtime's poller: the client's event loops
// (client.Options.EventLoops) read their connections so, rather than with
// a goroutine each.
//
// A goroutine blocked in epoll_wait, a system call, loses its P to
// sysmon and comes back through the scheduler. An epoll instance is
// itself pollable, so the runtime's poller holds the instance (an
// os.File): Wait asks epoll_wait without waiting, and when nothing is
// ready parks in the runtime's poller until the instance is readable, or
// its deadline passes.
//
// A socket read from an instance must not also be in the runtime's
// poller (each of its events would wake a thread of the runtime's too):
// its owner takes a duplicate of its descriptor (Dup) and closes the
// net.Conn, then reads and writes the duplicate raw, waiting in ppoll
// (WaitFd) where it must wait.
package epoll
