package client

import (
	"sync"
	"sync/atomic"
)

// call is one call waiting for its reply. Whoever takes it out of its
// wire's pending table (the reader on a reply, the wire on failure, the
// caller on a cancel) completes it, exactly once.
type call struct {
	// The first two cache lines hold what a call touches on its way, a
	// raw call's and an AsyncCaller's alike: at 10,000 connections each
	// call finds its record cold, and a line fewer is a miss fewer
	// (docs/performance.md).
	id       uint32
	torn     bool                          // the call failed while its reply was being read in
	unpooled bool                          // a watch may still look at it: not pooled
	reply    []byte                        // where the reply payload is appended, for this call
	then     func(reply []byte, err error) // an asynchronous call's raw done function
	owner    *AsyncCaller                  // the caller's own record it is part of: never pooled
	fut      *Future                       // set for Go calls, which complete the future instead
	done     chan struct{}                 // receives one value when the call completes

	route    string               // for the error of a call whose context ends
	deadline int64                // an asynchronous call's, monoNow's, for the async sweep (0: none, or its context's AfterFunc sees to it)
	stop     func() bool          // stops that AfterFunc
	err      error                // the call's failure
	watch    *ctxWatch            // the watch of its context; set before it enters a table (ctxwatch.go)
	on       atomic.Pointer[wire] // the wire an asynchronous call's context's watch forgets it from

	typed typedAsync // an asynchronous call's typed done function
	buf   []byte     // the call's own buffer, kept across uses
	retry asyncRetry // what it takes to send an asynchronous call again
}

// async reports whether cl is an asynchronous call.
func (cl *call) async() bool { return cl.then != nil || cl.typed.done != nil }

var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

func getCall() *call { return callPool.Get().(*call) }

func putCall(cl *call) {
	if cl.unpooled || cl.owner != nil {
		return
	}
	if cap(cl.buf) > 64<<10 {
		cl.buf = nil // do not pool a large reply's buffer
	}
	cl.reply, cl.err, cl.id, cl.route, cl.watch = nil, nil, 0, "", nil
	if cl.then != nil || cl.typed.done != nil {
		cl.then, cl.typed, cl.deadline, cl.stop, cl.retry = nil, typedAsync{}, 0, nil, asyncRetry{}
	}
	callPool.Put(cl)
}

// finish completes the call; its reply, if any, is in place before.
func (cl *call) finish(err error) {
	if cl.async() {
		cl.finishAsync(err)
		return
	}
	if f := cl.fut; f != nil {
		if err != nil && f.resend(err, cl.torn) {
			return // another goroutine sends it again and completes f
		}
		f.reply = cl.reply
		f.complete(err)
		return
	}
	cl.err = err
	cl.done <- struct{}{}
}
