package client

import (
	"context"
	"errors"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/engine"
	"github.com/rpcd/rpcd/proto"
)

// The retry rules, which docs/reliability.md states for users: a
// call is sent again only when it provably did not run (Unavailable or
// ResourceExhausted with the Unprocessed flag), or when its route is
// idempotent and it failed with Unavailable; at most Options.MaxRetries
// times, after a jittered backoff, while its context lasts. A call that
// finds no usable connection under Options.WaitForReady waits for one
// instead, without counting a retry. All of it runs only after a call has
// failed: a call that succeeds at once never comes here.

// retry sends a call whose attempt failed with err again, as long as the
// rules allow, and returns the last attempt's error, or nil once one
// succeeds.
func (c *Client) retry(ctx context.Context, h proto.Header, route string, md proto.Metadata, payload []byte, cl *call, err error) error {
	r := retrier{c: c, route: route}
	for {
		torn := cl.torn
		cl.torn = false // pooled calls start untorn
		if h.Deadline, err = r.again(ctx, err, torn); err != nil {
			return err
		}
		if err = c.once(ctx, h, route, md, payload, cl); err == nil {
			return nil
		}
	}
}

// retrier follows one call through its attempts.
type retrier struct {
	c     *Client
	route string
	n     int  // retries made
	ran   bool // an attempt may have run on the server
}

// again decides whether a call whose attempt failed with err is sent again,
// and waits until it may be: its backoff, or, for a call that found no
// usable connection under WaitForReady, a connection, or, for one that
// found none while the successor of a connection the server sent away is
// dialled, that successor (awaitSuccessor). It returns the
// deadline field for the next attempt's header, or the error to give the
// caller.
func (r *retrier) again(ctx context.Context, err error, torn bool) (uint32, error) {
	c := r.c
	if !handler.IsUnprocessed(err) {
		r.ran = true
	}
	switch {
	case err == c.noConn && c.opts.WaitForReady:
		if _, werr := c.awaitConn(ctx, r.route, err); werr != nil {
			return 0, retryResult(r.ran, werr)
		}
	case err == c.noConn && c.opts.MaxRetries > 0 && c.awaitSuccessor(ctx):
		// The server sent the connection away and its successor is up:
		// no backoff, and no retry counted.
	default:
		if r.n >= c.opts.MaxRetries || !c.retryable(r.route, err, torn) {
			return 0, retryResult(r.ran, err)
		}
		r.n++
		c.retries.Add(1)
		t := time.NewTimer(c.backoff(r.n - 1))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return 0, retryResult(r.ran, waitError(ctx, r.route, err))
		case <-c.ctx.Done():
			return 0, closedDuringRetry(r.ran, err)
		}
	}
	dl, ok := engine.DeadlineField(ctx)
	if !ok {
		return 0, retryResult(r.ran, waitError(ctx, r.route, err))
	}
	return dl, nil
}

// retryResult is the error to give the caller of a call whose last attempt
// failed with err: it keeps the Unprocessed flag only if no attempt may
// have run (ran false). A Client's calls and a Cluster's both end here.
func retryResult(ran bool, err error) error {
	var e *handler.Error
	if ran && errors.As(err, &e) && e.Unprocessed {
		cp := *e // e may be shared (a wire's failure); do not change it
		cp.Unprocessed = false
		return &cp
	}
	return err
}

// closedDuringRetry is the error of a call whose client (or cluster)
// closed while it waited to be sent again after its attempt failed with
// err: ErrClosed if no attempt may have run, else err, without
// Unprocessed: ErrClosed is Unprocessed, and the call may have run.
func closedDuringRetry(ran bool, err error) error {
	if ran {
		return retryResult(ran, err)
	}
	return ErrClosed
}

// retryable reports whether a call to route whose attempt failed with err
// may be sent again (retryRule).
func (c *Client) retryable(route string, err error, torn bool) bool {
	return retryRule(&c.opts, c.closed.Load(), route, err, torn)
}

// retryRule is the retry rule, for a Client and a Cluster alike, under
// their options o: a call to route whose attempt failed with err may be
// sent again if it provably did not run and a later attempt can succeed
// (Unavailable or ResourceExhausted, Unprocessed), or if its route is
// idempotent and the failure is Unavailable. A call whose reply had begun
// to arrive (torn) ran, and part of its reply is in its buffer: never; nor
// once the client or cluster is closed.
func retryRule(o *Options, closed bool, route string, err error, torn bool) bool {
	var e *handler.Error
	if torn || closed || !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case proto.CodeUnavailable:
		return e.Unprocessed || (o.Idempotent != nil && o.Idempotent(route))
	case proto.CodeResourceExhausted:
		return e.Unprocessed
	}
	return false
}

// resends reports whether a call may be sent more than once, so that what
// it takes to send it must be kept until it ends.
func (o *Options) resends() bool { return o.MaxRetries > 0 || o.WaitForReady }

func (c *Client) resends() bool { return c.opts.resends() }

// awaitConn waits, for a call under WaitForReady that found no usable
// connection (its error last), until one is usable, ctx ends or the client
// closes.
func (c *Client) awaitConn(ctx context.Context, route string, last error) (*wire, error) {
	for {
		c.readyMu.Lock()
		ready := c.ready
		c.readyMu.Unlock()
		if w, err := c.pick(); err != c.noConn {
			return w, err
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, waitError(ctx, route, last)
		case <-c.ctx.Done():
			return nil, ErrClosed
		}
	}
}

// awaitSuccessor waits, for a call that found no usable connection, while
// a slot dials the successor of a connection the server sent away after
// serving it (a drain, its maximum age: Client.keep), so that the call goes
// on the new connection rather than failing in the moment between the two.
// It reports whether a connection is usable now; false, at once, if no
// successor is being dialled, or if the dial failed, ctx ended or the
// client closed first.
func (c *Client) awaitSuccessor(ctx context.Context) bool {
	if c.replacing.Load() == 0 {
		return false
	}
	for c.replacing.Load() > 0 {
		c.readyMu.Lock()
		ready := c.ready
		c.readyMu.Unlock()
		if _, err := c.pick(); err != c.noConn {
			return err == nil
		}
		if c.replacing.Load() == 0 {
			break
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return false
		case <-c.ctx.Done():
			return false
		}
	}
	_, err := c.pick()
	return err == nil
}

// waitError is the error of a call whose context ended (or whose deadline
// passed) while it waited to be sent, after an attempt that failed with
// last. It is marked Unprocessed; retryResult clears that if an earlier
// attempt may have run.
func waitError(ctx context.Context, route string, last error) error {
	code, what := proto.CodeDeadlineExceeded, "deadline exceeded"
	if errors.Is(ctx.Err(), context.Canceled) {
		code, what = proto.CodeCanceled, "canceled"
	}
	return &handler.Error{Code: code, Unprocessed: true,
		Message: "call " + route + ": " + what + " while waiting to send it (" + handler.MessageOf(last) + ")"}
}

// resend takes over a Go call whose attempt failed with err if the call may
// be sent again: a goroutine then sends it, as Call would, and completes f.
// It runs on the goroutine that failed the attempt (a reader), so it only
// decides.
func (f *Future) resend(err error, torn bool) bool {
	f.endAttempt(err)
	if f.k != nil {
		return f.k.resend(f, err, torn)
	}
	c := f.c
	if c == nil {
		return false
	}
	if !(err == c.noConn && c.opts.WaitForReady) && (c.opts.MaxRetries <= 0 || !c.retryable(f.route, err, torn)) {
		return false
	}
	go func() {
		cl := getCall()
		cl.torn = torn
		err := c.retry(f.ctx, f.h, f.route, f.md, f.payload, cl, err)
		if err == nil {
			f.reply = cl.reply
		}
		putCall(cl) // which drops cl.reply, now f's
		f.complete(err)
	}()
	return true
}
