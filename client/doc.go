// Package client calls rpcd servers. It is goroutine-based: many goroutines
// call concurrently over one or more connections, each call matched to its
// reply by call id.
//
// Per connection, a caller writes its own request when no write is in
// progress, and a writer goroutine, which runs while it has something to
// write, gathers every frame queued meanwhile into one write. While the
// goroutine reading a connection delivers a batch of replies read
// together, the requests of the callers they wake, and of the calls their
// done functions start, wait, and the reader writes them in one write at
// the batch's end, as far as the socket takes them without waiting (a
// writer goroutine sends the rest); it reads and writes with raw system
// calls. One goroutine at a time reads a connection: a caller that
// finds no one reading reads until its own reply comes, so the network
// poller wakes it directly with no hand-off between goroutines, and
// completes any other call whose reply it meets on the way; the
// connection's listener goroutine reads while other callers wait, while
// the server may send at any moment (routes the client serves, pushes,
// subscriptions, streams), and on a connection whose callers have stopped
// (1 ms to about 130 ms after the last call, the longer after a long run
// of calls), so a GoAway or a Ping is heard between calls. With
// several connections, a call goes to one no one reads first, then to one
// only its listener reads, and only then round robin. A call's
// context deadline travels in its frame; cancelling the context sends a
// Cancel frame and frees the call, at once, or within 20 ms if its caller
// is reading the connection for itself. Callers that keep sharing a
// context without a deadline (a program's, a server's) wait on their calls
// alone, and one watch of the context, for at most four contexts at a
// time, ends their calls when it ends. Calls on a broken
// connection fail fast with an Unavailable error, and the client reconnects
// in the background with exponential backoff and jitter; a connection that
// receives a GoAway takes no new call, is replaced after the first backoff
// (MinBackoff, halved at random) and closes when its calls are answered;
// when the server sent it away after serving it (a drain, its maximum
// age), calls that find no connection meanwhile wait for the new one. No call stays pending: each leaves the table on its reply, its
// deadline, its cancel, or the loss of its connection.
//
// A call that provably did not run (an Unavailable or ResourceExhausted
// error marked Unprocessed) is sent again, at most Options.MaxRetries
// times, after a short jittered backoff, while its context lasts; calls to
// routes marked Options.Idempotent are also sent again after a lost
// connection. No other call is ever sent twice, and one-way calls never
// are. A connection that reads nothing for Options.KeepAlive is pinged, and
// failed if nothing comes back within Options.KeepAliveTimeout, so a peer
// gone without a word is noticed.
//
// A program that keeps many calls in flight from few goroutines calls
// asynchronously: CallRawAsync and CallAsync return at once, and the call's
// done function runs when it completes, on the goroutine that reads its
// reply, with no goroutine, channel or timer of its own; calls started from
// done functions go out together, and Batch sends the calls it starts in
// one write. Their deadlines, cancellation, retries and errors are Call's.
// An AsyncCaller is one caller's own record for such calls made one at a
// time, each started from the last one's done function, without a context:
// the client pools nothing for it, and its done function learns when its
// reply was read without reading the clock. A Pipe holds up to a fixed
// number of such calls for one owner, tagged, behind one lock that the
// reader takes once for a batch of its replies: their done functions run
// with it held and start the next calls (Pipe.Next), which go out at the
// batch's end without a lock of their own. Call and CallRaw suit a
// goroutine that needs the reply to go on; Go and GoRaw, a few calls in
// flight waited for together; CallRawAsync and CallAsync, many in flight
// with a context each; AsyncCaller, a caller of its own for calls made
// over and over from anywhere; Pipe, many calls in flight started from
// their predecessors' completions, where each call's CPU counts (rpcd's
// load generator, a relay). A program of thousands of connections,
// each with a call or two in flight, sets Options.EventLoops: the
// process's epoll loops, one per P, read them all, and a reply wakes no
// goroutine of its own (Linux).
//
// A Cluster, from DialService, calls a service of several servers: one
// Client per node, the nodes followed through a Resolver (Static, or etcd
// with package discovery/etcd), calls spread by round robin, least calls in
// flight or consistent hashing (Balance), with weights, only to nodes
// that publish the call's route, preferring the client's zone, and a
// failed call sent again to another node by the same rules, within a
// retry budget; an empty set from the resolver does not replace nodes
// that still answer, and health checks can keep calls off nodes that say
// they do not serve. It has a Client's calls, futures (Go, GoRaw) among
// them. docs/scale-out.md has the guarantees.
package client
