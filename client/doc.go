// Package client calls rpcd servers. It is goroutine-based: many goroutines
// call concurrently over one or more connections, each call matched to its
// reply by call id.
//
// Per connection, a writer goroutine gathers every frame queued while it was
// busy into one write, and a reader goroutine completes calls as replies
// arrive. A call's context deadline travels in its frame; cancelling the
// context sends a Cancel frame and frees the call at once. Calls on a broken
// connection fail fast with an Unavailable error, and the client reconnects
// in the background with exponential backoff and jitter. No call stays
// pending: each leaves the table on its reply, its deadline, its cancel, or
// the loss of its connection.
package client
