package client

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/proto"
)

// An AsyncCaller is one caller's own record for asynchronous calls made
// one at a time, for a program that keeps many calls in flight from few
// goroutines and needs no context per call: a load generator, a relay, a
// pipeline stage. Its calls are CallEncodedAsync's with
// context.Background, less what a call costs that a caller keeps one of:
// the client takes no call record from its pool, and its done function
// can learn when its reply was read without reading the clock (Answered).
//
// A record carries one call at a time: start the next from its done
// function (where it goes out with the others its batch of replies starts,
// in one write), or once done has returned; Call panics while a call is
// in flight. Deadlines are Options.Timeout's, counted, for a call started
// from done, from when the reply that ran done was read (a batch's replies
// share one time, read at its first, so a call started late in a long
// batch counts from a little before its start); retries and errors are
// CallRaw's. With Options.Interceptors,
// which wait for the call, each call runs on a goroutine of its own. A call
// that needs a context's deadline, cancellation or values is
// CallRawAsync's.
type AsyncCaller struct {
	// First, so that with the record's hot fields after them a call
	// touches three lines of it (call).
	c      *Client
	done   func(reply []byte, err error)
	busy   atomic.Bool // a call is in flight
	inDone atomic.Bool // done is running
	at     time.Time   // when the call's reply was read, its batch's time (stamp); zero if none was

	cl call
}

// NewAsyncCaller returns a record for calls through c that completes each
// with done, which runs as CallRawAsync's does: on the goroutine that reads
// the reply (or on the caller's, for a call that fails before it is sent),
// and must not block.
func (c *Client) NewAsyncCaller(done func(reply []byte, err error)) *AsyncCaller {
	a := &AsyncCaller{c: c, done: done}
	a.cl = call{done: make(chan struct{}, 1), owner: a, then: done}
	return a
}

// Call starts a call of route with req, encoded with codec, its reply
// appended to reply; it returns at once, and the record's done function
// runs once the call has completed. req is the call's until done runs.
func (a *AsyncCaller) Call(codec proto.Codec, route string, req, reply []byte) {
	if !a.busy.CompareAndSwap(false, true) {
		panic("rpcd: client: AsyncCaller.Call while its call is in flight")
	}
	c, cl := a.c, &a.cl
	if c.icpt != nil { // interceptors wait for the call: a goroutine of its own
		a.at = time.Time{}
		go func() {
			reply, err := callRaw(context.Background(), c, codec, route, req, reply)
			cl.reply = reply
			a.answered(reply, transport.Received(err))
		}()
		return
	}
	var start int64
	if a.inDone.Load() && !a.at.IsZero() { // from done: the reply that ran it was read at a.at
		start = int64(a.at.Sub(monoBase))
	}
	a.at = time.Time{}
	cl.reply, cl.torn, cl.deadline = reply, false, 0
	c.startAsync(context.Background(), codec, route, req, cl, start)
}

// answered completes the record's call: it frees the record, then runs
// done, during which a call started on it counts its deadline from a.at.
// The record keeps its last request for a retry (asyncRetry) until the
// next call: it is the caller's buffer.
func (a *AsyncCaller) answered(reply []byte, err error) {
	a.busy.Store(false)
	a.inDone.Store(true)
	a.done(reply, err)
	a.inDone.Store(false)
}

// Answered returns, in done and before the record's next call starts,
// when the reply of the call done completes was read: the time of its
// batch of replies, read once for the batch. It is the zero Time for a
// call that ended without a reply (a deadline, a lost connection, one
// never sent).
func (a *AsyncCaller) Answered() time.Time { return a.at }
