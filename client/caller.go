package client

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/internal/engine"
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
	c     *Client
	done  func(reply []byte, err error)
	state atomic.Uint32 // callerIdle, callerInDone, callerBusy or callerBusyFromDone
	at    time.Time     // when the call's reply was read, its batch's time (stamp); zero if none was
	check engine.RouteCheck

	cl call
}

// An AsyncCaller's states. A call made from done and answered takes two
// locked instructions of the record (answered's store, Call's swap), where
// a flag for each of busy and in done took four. A call started while done
// runs, from done or from another goroutine, counts its deadline from at.
const (
	callerIdle         = iota // no call in flight, done not running
	callerInDone              // done runs; the call it completes is over
	callerBusy                // a call is in flight, started outside done
	callerBusyFromDone        // a call is in flight, started while done ran
)

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
	fromDone := false
	switch s := a.state.Load(); {
	case s == callerInDone && a.state.CompareAndSwap(callerInDone, callerBusyFromDone):
		fromDone = true
	case a.state.CompareAndSwap(callerIdle, callerBusy): // idle, or done returned since the load
	default:
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
	if fromDone && !a.at.IsZero() { // the reply that ran done was read at a.at
		start = int64(a.at.Sub(monoBase))
	}
	a.at = time.Time{}
	cl.reply, cl.torn, cl.deadline, cl.route = reply, false, 0, route
	if err := a.check.Check(route, req, &c.opts.Limits); err != nil {
		cl.complete(err)
		return
	}
	// Built here and passed on by its address, not returned by
	// engine.Header and copied: the copy waited for the fields' stores.
	h := proto.Header{Kind: proto.KindRequest, Codec: codec}
	c.sendAsync(context.Background(), &h, nil, route, req, cl, start)
}

// answered completes the record's call: it frees the record, then runs
// done, during which a call started on it counts its deadline from a.at.
// The record keeps its last request for a retry (asyncRetry) until the
// next call: it is the caller's buffer.
func (a *AsyncCaller) answered(reply []byte, err error) {
	a.state.Store(callerInDone)
	a.done(reply, err)
	if a.state.Load() == callerInDone { // no call was started from done
		a.state.CompareAndSwap(callerInDone, callerIdle)
	}
}

// Answered returns, in done and before the record's next call starts,
// when the reply of the call done completes was read: the time of its
// batch of replies, read once for the batch. It is the zero Time for a
// call that ended without a reply (a deadline, a lost connection, one
// never sent).
func (a *AsyncCaller) Answered() time.Time { return a.at }
