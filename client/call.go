package client

import (
	"sync"
	"sync/atomic"
)

// call is one call waiting for its reply. Whoever takes it out of its
// wire's pending table (the reader on a reply, the wire on failure, the
// caller on a cancel) completes it, exactly once.
type call struct {
	id    uint32
	reply []byte        // where the reply payload is appended, for this call
	buf   []byte        // the call's own buffer, kept across uses
	err   error         // the call's failure
	done  chan struct{} // receives one value when the call completes
	fut   *Future       // set for Go calls, which complete the future instead
	torn  bool          // the call failed while its reply was being read in

	route string    // for the error of a call whose context ends
	watch *ctxWatch // the watch of its context; set before it enters a table (ctxwatch.go)

	// An asynchronous call's (async.go): its done function, raw or typed;
	// its deadline, monoNow's, for the async sweep (0: none, or its
	// context's AfterFunc sees to it); what stops that AfterFunc; and what
	// it takes to send it again.
	then     func(reply []byte, err error)
	typed    typedAsync
	deadline int64
	stop     func() bool
	retry    asyncRetry
	on       atomic.Pointer[wire] // the wire its context's watch forgets it from
	unpooled bool                 // a watch may still look at it: not pooled
	owner    *AsyncCaller         // the caller's own record it is part of: never pooled
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
