package client

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/rpcd/rpcd/internal/engine"
)

// A caller waiting for its reply behind another reader must also hear its
// context end. A select on the call's channel and the context's Done does
// both, but costs several times a plain receive, and callers sharing one
// context (a program's, a request's) all lock its Done channel to wait and
// again to stop: with 128 callers on a connection, a sixth of the client's
// CPU (docs/performance.md). So a context that calls keep sharing gets a
// ctxWatch: one context.AfterFunc for all of them, which, when the context
// ends, takes their calls out of the pending tables and completes them with
// its error; meanwhile each caller waits on its call alone.
//
// A context is watched if it has no deadline (one with a deadline is most
// often made for its call), from the second call in a row under it, so
// that a context made for one call never costs an AfterFunc, and only
// while a slot is free: a handful of contexts at a time, each until it
// ends or the client closes. Calls under other contexts select as before.

// watchSlots is how many contexts a client watches at a time.
const watchSlots = 4

// ctxWatch is one watched context.
type ctxWatch struct {
	ctx  context.Context
	done <-chan struct{} // ctx.Done()
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

// watchFor returns the watch of ctx, installing one if calls keep coming
// under it; nil if it is not watched. A call marked with it before it
// enters a pending table, and whose caller then sees ctx not ended, is
// completed by the watch when ctx ends: the watch fires only after ctx
// has ended, and looks for its calls in the tables after that.
func (ws *ctxWatches) watchFor(ctx context.Context) *ctxWatch {
	if _, ok := ctx.Deadline(); ok {
		// Most often a call's own (context.WithTimeout, or a timeoutCtx),
		// whose Done channel asking would make (or have the sweep watch).
		return nil
	}
	done := ctx.Done()
	if done == nil {
		return nil
	}
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
	cw := &ctxWatch{ctx: ctx, done: done}
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

// ctxEnded completes the calls waiting under cw, whose context has ended,
// on every connection, and tells the server of each.
func (c *Client) ctxEnded(cw *ctxWatch) {
	for _, s := range c.slots {
		w := s.w.Load()
		if w == nil {
			continue
		}
		for id, cl := range w.pending.TakeIf(func(cl *call) bool { return cl.watch == cw }) {
			c.ctxs.endedCalls.Add(1)
			w.abandon(id) // the caller may not have cl.id yet
			cl.finish(engine.ContextError(cw.ctx.Err(), cl.route))
		}
	}
}
