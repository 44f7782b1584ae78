// Package engine is what a connection does whichever end it is
// (docs/protocol.md): the protocol is symmetric, so the server (reactor)
// and the client (client) run the same steps here and plug in only how
// they read and write.
//
//   - Outgoing calls: the header of a call this end makes (Header: route,
//     limits, metadata with trace context and baggage, the Deadline
//     field), the table of calls waiting for answers and their ids
//     (Calls), the answer that completes one (Answer), and the error of a
//     call whose context ended (ContextError).
//   - Incoming calls: the deadline a frame's Deadline field gives
//     (Deadline), the copy of the sections a handler off the reader reads
//     (Copy), the Call it runs under (Start), and the calls running, by
//     id, for Cancel (Running).
//   - Streams: a connection's table of open streams (Streams), with the
//     steps that open one, accept one the peer opens, move the peer's
//     frames into them and forget them; each stream's own state is
//     package internal/stream's.
//
// Nothing here reads or writes a socket, and nothing here waits: frames go
// out through a stream.Link or are appended to a buffer the caller writes.
package engine
