package handler

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/rpcd/rpcd/proto"
)

// Call is the context.Context a handler runs under. It carries the call's
// route, id, codec, metadata, remote address and deadline, and is cancelled
// when the caller cancels, the deadline passes or the connection closes.
//
// A transport owns each Call and reuses it for later calls, so it is valid
// only until the handler returns: a handler that starts work outliving the
// call gives that work a context of its own (context.WithoutCancel(ctx) keeps
// the values, not the Call).
type Call struct {
	Route    string         // the route called, as registered
	ID       uint32         // the caller's call id
	Codec    proto.Codec    // codec of the request payload and of the reply
	Metadata proto.Metadata // the request's metadata section
	Remote   net.Addr       // the caller's address
	Identity *Identity      // who the connection authenticated as; nil if it did not

	// Peer calls and notifies the other end of the connection (see Peer);
	// nil if the transport offers none.
	Peer Peer
	// Inline is set while the handler runs on a server's event loop, which
	// it must not block: calls through a Client, a Cluster or Peer that
	// would wait for a reply refuse to there (transport.RefuseWait).
	Inline bool

	parent   context.Context
	deadline time.Time

	mu     sync.Mutex
	done   chan struct{} // made on first Done; closed on cancel
	err    error         // set on cancel
	timer  *time.Timer   // armed by Done when there is a deadline
	expire func()        // c.expireNow, bound once

	// watch, if set (transport.CancelWhen), cancels the call when it
	// ends: Err looks at it, and Done arms a context.AfterFunc on it, so a
	// call whose handler never asks costs nothing to watch.
	watch   context.Context
	unwatch func() bool // stops the AfterFunc Done armed
	watched func()      // c.watchEnded, bound once
}

// Identity is who a connection authenticated as, in its handshake.
type Identity struct {
	Subject string   // the name the credentials stand for
	Method  string   // how it authenticated: "token", "hmac", ...
	Roles   []string // what the credentials grant, for authorization
}

// HasRole reports whether id grants role.
func (id *Identity) HasRole(role string) bool {
	if id == nil {
		return false
	}
	for _, r := range id.Roles {
		if r == role {
			return true
		}
	}
	return false
}

type callKey struct{}

// CallFrom returns the Call that ctx is or wraps, or nil outside a call.
func CallFrom(ctx context.Context) *Call {
	if c, ok := ctx.(*Call); ok {
		return c
	}
	c, _ := ctx.Value(callKey{}).(*Call)
	return c
}

// Start readies c for a call whose fields the transport has just set. parent
// supplies values (Value) only; deadline is zero for none.
func (c *Call) Start(parent context.Context, deadline time.Time) {
	c.parent = parent
	if c.timer == nil { // no timer goroutine can be reading the deadline
		c.deadline = deadline
		return
	}
	c.mu.Lock()
	c.deadline = deadline
	c.mu.Unlock()
}

// End releases what the call holds (its deadline timer, its cancellation)
// and drops its view of the request's metadata. The transport calls it after
// the handler has returned, and sets the other fields anew for the next
// call; Remote and the parent may stay, for the next call on the same
// connection.
//
// End reports whether c may serve another call. It may not once Done has
// handed out its channel: contexts derived from c, and the goroutines the
// context package runs for them, can still look at c after the handler
// returns. Such a Call is cancelled for good (contexts derived from it end
// too), and the transport makes a new one.
func (c *Call) End() (reusable bool) {
	if c.timer == nil && c.done == nil && c.err == nil {
		// Nothing was armed, made or cancelled: no other goroutine can be
		// looking at c, and there is nothing to release.
		c.deadline = time.Time{}
		c.Metadata, c.watch = nil, nil
		return true
	}
	c.mu.Lock()
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.unwatch != nil {
		c.unwatch() // if it has begun, it finds c cancelled below
		c.unwatch = nil
	}
	c.watch = nil
	handedOut := c.done != nil
	if handedOut {
		if c.err == nil {
			c.err = context.Canceled // the call is over
			close(c.done)
		}
	} else {
		c.err = nil
		c.deadline = time.Time{}
	}
	c.mu.Unlock()
	c.Metadata = nil
	return !handedOut
}

// Cancel cancels the call with err (context.Canceled or
// context.DeadlineExceeded): Done closes and Err returns err. Later cancels
// do nothing.
func (c *Call) Cancel(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
}

// Deadline returns the call's deadline, if the caller sent one.
func (c *Call) Deadline() (time.Time, bool) {
	return c.deadline, !c.deadline.IsZero()
}

// Done returns a channel closed when the call is cancelled or its deadline
// passes.
func (c *Call) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err == nil && c.watch != nil && c.watch.Err() != nil {
			c.err = context.Canceled
		}
		if c.err != nil {
			close(c.done)
			return c.done
		}
		if c.watch != nil {
			if c.watched == nil {
				c.watched = c.watchEnded
			}
			c.unwatch = context.AfterFunc(c.watch, c.watched)
		}
	}
	if c.err == nil && !c.deadline.IsZero() {
		d := time.Until(c.deadline)
		if d <= 0 {
			c.err = context.DeadlineExceeded
			close(c.done)
			return c.done
		}
		if c.expire == nil {
			c.expire = c.expireNow
		}
		if c.timer == nil {
			c.timer = time.AfterFunc(d, c.expire)
		} else {
			c.timer.Reset(d)
		}
	}
	return c.done
}

// watchEnded runs when the context Done watches ends: it cancels the call.
func (c *Call) watchEnded() { c.Cancel(context.Canceled) }

// setWatch makes the end of ctx cancel c (transport.CancelWhen).
func (c *Call) setWatch(ctx context.Context) { c.watch = ctx }

// expireNow runs on the deadline timer. A timer armed for an earlier call can
// fire late; the deadline check makes that harmless.
func (c *Call) expireNow() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil || c.deadline.IsZero() || time.Now().Before(c.deadline) {
		return
	}
	c.err = context.DeadlineExceeded
	if c.done != nil {
		close(c.done)
	}
}

// Err returns nil while the call runs, then context.Canceled or
// context.DeadlineExceeded.
func (c *Call) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil && !c.deadline.IsZero() && !time.Now().Before(c.deadline) {
		c.err = context.DeadlineExceeded
		if c.done != nil {
			close(c.done)
		}
	}
	if c.err == nil && c.watch != nil && c.watch.Err() != nil {
		c.err = context.Canceled
		if c.done != nil {
			close(c.done)
		}
	}
	return c.err
}

// Value returns the Call itself for CallFrom, and the parent's values
// otherwise.
func (c *Call) Value(key any) any {
	if key == (callKey{}) {
		return c
	}
	if c.parent == nil {
		return nil
	}
	return c.parent.Value(key)
}

func (c *Call) String() string { return "rpcd call " + c.Route }
