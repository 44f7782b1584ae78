package client

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// A caller waiting for its reply behind another reader must also hear its
// context end. A select on the call's channel and the context's Done does
// both, but costs several times a plain receive, and callers sharing one
// context (a program's, a request's) all lock its Done channel to wait and
// again to stop: with 128 callers on a connection, a fifth of the client's
// CPU (docs/performance.md). So a context that callers keep sharing gets a
// ctxWatch: one context.AfterFunc for all of them, which, when the context
// ends, takes their calls out of the pending tables and completes them;
// meanwhile each waits on its call alone.
//
// A context is watched from the second wait in a row under it, so that a
// context made for one call never costs an AfterFunc, and only while a
// slot is free: a handful of contexts at a time, each until it ends or the
// client closes. Other callers select as before.

// watchSlots is how many contexts a client watches at a time.
const watchSlots = 4

// errCtxEnded completes a call whose watched context ended; its caller
// returns the context's error in its place.
var errCtxEnded = errors.New("rpcd: the call's context ended")

// ctxWatch is one watched context.
type ctxWatch struct {
	done <-chan struct{} // the context's Done
	stop func() bool     // ends the AfterFunc
}

// ctxWatches is a client's watched contexts.
type ctxWatches struct {
	slots  [watchSlots]atomic.Pointer[ctxWatch]
	last   atomic.Value // the Done channel of the last wait not watched
	full   atomic.Bool  // no slot is free (or the client closed): install not
	mu     sync.Mutex   // installs and removes
	closed bool         // under mu

	ended      func(*ctxWatch) // completes the calls under a context that ended
	endedCalls atomic.Uint64   // calls completed so, for tests
}

// lookup returns the watch of the context whose Done is done, installing
// one if callers keep waiting under it; nil if it is not watched.
func (ws *ctxWatches) lookup(ctx context.Context, done <-chan struct{}) *ctxWatch {
	for i := range ws.slots {
		if cw := ws.slots[i].Load(); cw != nil && cw.done == done {
			return cw
		}
	}
	if ws.full.Load() {
		return nil
	}
	if last, _ := ws.last.Load().(<-chan struct{}); last != done {
		ws.last.Store(done)
		return nil
	}
	return ws.install(ctx, done)
}

// install watches ctx in a free slot, if there is one.
func (ws *ctxWatches) install(ctx context.Context, done <-chan struct{}) *ctxWatch {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	free := -1
	for i := range ws.slots {
		cw := ws.slots[i].Load()
		if cw != nil && cw.done == done {
			return cw // installed meanwhile
		}
		if cw == nil && free < 0 {
			free = i
		}
	}
	if free < 0 || ws.closed {
		ws.full.Store(true)
		return nil
	}
	cw := &ctxWatch{done: done}
	ws.slots[free].Store(cw)
	cw.stop = context.AfterFunc(ctx, func() { ws.fire(cw) })
	return cw
}

// fire runs when a watched context ends: the slot is freed, and the calls
// waiting under the context are completed.
func (ws *ctxWatches) fire(cw *ctxWatch) {
	ws.mu.Lock()
	for i := range ws.slots {
		ws.slots[i].CompareAndSwap(cw, nil)
	}
	ws.full.Store(ws.closed)
	ws.mu.Unlock()
	ws.ended(cw)
}

// stop ends every watch, when the client closes.
func (ws *ctxWatches) stop() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.closed = true
	ws.full.Store(true)
	for i := range ws.slots {
		if cw := ws.slots[i].Swap(nil); cw != nil {
			cw.stop()
		}
	}
}

// waitWatched waits for cl's reply on cl alone when ctx is watched, and
// reports whether it did; the caller selects otherwise. cl is marked with
// the watch before ctx is looked at, and the watch fires only after ctx
// has ended: so either the watch finds cl, or ctx is seen ended here.
func (c *Client) waitWatched(ctx context.Context, done <-chan struct{}, cl *call, route string) (bool, error) {
	cw := c.ctxs.lookup(ctx, done)
	if cw == nil {
		return false, nil
	}
	cl.watch.Store(cw)
	if ctx.Err() != nil {
		cl.watch.Store(nil)
		return false, nil
	}
	<-cl.done
	cl.watch.Store(nil)
	if cl.err == errCtxEnded {
		return true, contextError(ctx.Err(), route)
	}
	return true, cl.err
}

// ctxEnded completes the calls waiting under cw, whose context has ended,
// on every connection, and tells the server of each.
func (c *Client) ctxEnded(cw *ctxWatch) {
	for _, s := range c.slots {
		w := s.w.Load()
		if w == nil {
			continue
		}
		for _, cl := range w.pending.takeIf(func(cl *call) bool { return cl.watch.Load() == cw }) {
			c.ctxs.endedCalls.Add(1)
			w.abandon(cl.id)
			cl.finish(errCtxEnded)
		}
	}
}
