package client

import (
	"context"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/internal/engine"
	"github.com/rpcd/rpcd/proto"
)

// Call calls route on a node with in encoded as JSON (or Options.Codec)
// and decodes the reply into out, as Client.Call does. A call that fails
// is sent again by the rules of Options.MaxRetries, to another node when
// there is one.
func (k *Cluster) Call(ctx context.Context, route string, in, out any) error {
	return transport.Received(callTyped(ctx, k, route, in, out))
}

// CallRaw calls route on a node with req as a raw payload and appends the
// reply to reply, as Client.CallRaw does; with a reply buffer of enough
// capacity it allocates nothing.
func (k *Cluster) CallRaw(ctx context.Context, route string, req, reply []byte) ([]byte, error) {
	reply, err := callRaw(ctx, k, proto.CodecRaw, route, req, reply)
	return reply, transport.Received(err)
}

// Notify sends a one-way call to one node, as Client.Notify does: never
// twice; with no usable node it fails with Unavailable, or, under
// Options.WaitForReady, waits for one.
func (k *Cluster) Notify(ctx context.Context, route string, in any) error {
	return transport.Received(notifyTyped(ctx, k, route, in))
}

// NotifyRaw sends a one-way call with a raw payload; see Notify.
func (k *Cluster) NotifyRaw(ctx context.Context, route string, req []byte) error {
	return transport.Received(notifyRaw(ctx, k, proto.CodecRaw, route, req))
}

func (k *Cluster) notify(ctx context.Context, codec proto.Codec, route string, payload []byte) error {
	for {
		n, err := k.pick(ctx, route, payload, nil)
		if err == k.noNode && k.opts.WaitForReady {
			if werr := transport.RefuseWait(ctx, "waiting for a node to notify", route); werr != nil {
				return werr
			}
			err = k.awaitNode(ctx, route, err)
			if err == nil {
				continue
			}
		}
		if err != nil {
			return err
		}
		err = n.c.notify(ctx, codec, route, payload)
		n.release()
		return err
	}
}

// pick chooses the node for a call and counts the call on it (release
// uncounts it), or returns k.noNode.
func (k *Cluster) pick(ctx context.Context, route string, payload []byte, avoid *node) (*node, error) {
	return k.pickFor(ctx, route, payload, avoid, true)
}

// pickFor is pick; a call's copy (Hedge) does not take a turn of round
// robin (advance false), so that the call after it starts where it
// would have.
func (k *Cluster) pickFor(ctx context.Context, route string, payload []byte, avoid *node, advance bool) (*node, error) {
	if k.closed.Load() {
		return nil, ErrClosed
	}
	var key string
	var hasKey bool
	if k.opts.Balance == Hash {
		if k.opts.HashKey != nil {
			key, hasKey = k.opts.HashKey(ctx, route, payload)
		} else {
			key, hasKey = affinityFrom(ctx)
		}
	}
	w := want{route: route, key: key, hasKey: hasKey, avoid: avoid, advance: advance}
	for range 4 { // a node that left between the load and acquire: pick again
		n := k.tab.Load().pick(k.opts.Balance, &w)
		if n == nil {
			return nil, k.noNode
		}
		if n.acquire() {
			return n, nil
		}
	}
	return nil, k.noNode
}

// do sends a request to a node and waits for its reply in cl.reply, sending
// it again, to another node when there is one, as the retry rules allow.
func (k *Cluster) do(ctx context.Context, codec proto.Codec, route string, payload []byte, cl *call) error {
	ctx, b := k.sweep.bound(ctx, k.opts.Timeout) // Options.Timeout (timeout.go)
	defer b.release()
	h, md, err := engine.Header(ctx, proto.KindRequest, codec, route, payload, &k.hc.opts.Limits)
	if err != nil {
		return err
	}
	if k.hedged(route) {
		return k.hedge(ctx, h, route, md, payload, cl)
	}
	var s sending
	if err = k.attempt(ctx, h, route, md, payload, cl, &s); err == nil {
		return nil
	}
	torn := cl.torn
	cl.torn = false
	return k.resume(ctx, h, route, md, payload, cl, &s, err, torn)
}

// sending is where a call through a cluster stands between its attempts.
type sending struct {
	last      *node // the node of the last attempt
	retries   int
	redirects int  // attempts sent elsewhere after a node said it lacks the route
	ran       bool // an attempt may have run on a server
}

// attempt sends a call once, to a node other than s.last if there is one,
// and waits for its reply.
func (k *Cluster) attempt(ctx context.Context, h proto.Header, route string, md proto.Metadata, payload []byte, cl *call, s *sending) error {
	n, err := k.pick(ctx, route, payload, s.last)
	if err != nil {
		return err
	}
	err = n.c.once(ctx, h, route, md, payload, cl)
	n.release()
	n.record(err)
	if err != nil {
		n.noteMisrouted(route, err)
	}
	s.last = n
	return err
}

// resume sends again a call whose attempt failed with err (torn: while its
// reply was read in), as long as the rules allow, and returns the last
// attempt's error, or nil once one succeeds.
func (k *Cluster) resume(ctx context.Context, h proto.Header, route string, md proto.Metadata, payload []byte, cl *call, s *sending, err error, torn bool) error {
	for {
		if !handler.IsUnprocessed(err) {
			s.ran = true
		}
		switch {
		case err == k.noNode && k.opts.WaitForReady:
			if werr := k.awaitNode(ctx, route, err); werr != nil {
				return retryResult(s.ran, werr)
			}
		case k.redirect(route, err, s):
			// Sent at once to a node that may have the route; not a retry
			// of MaxRetries, nor of the budget. Each node is asked once.
			s.redirects++
			k.retries.Add(1)
		default:
			if !k.retryable(route, err, torn) {
				return retryResult(s.ran, err)
			}
			if k.budget != nil && !k.budget.failed() {
				k.throttled.Add(1)
				return retryResult(s.ran, err)
			}
			if s.retries >= k.opts.MaxRetries {
				return retryResult(s.ran, err)
			}
			s.retries++
			k.retries.Add(1)
			// Another node is tried at once; the same node, or none, after
			// the backoff, as a single client would.
			if !k.tab.Load().another(route, s.last) {
				if werr := k.backoff(ctx, route, s.retries, err); werr == ErrClosed {
					return closedDuringRetry(s.ran, err)
				} else if werr != nil {
					return retryResult(s.ran, werr)
				}
			}
		}
		var ok bool
		if h.Deadline, ok = engine.DeadlineField(ctx); !ok {
			return retryResult(s.ran, waitError(ctx, route, err))
		}
		if err = k.attempt(ctx, h, route, md, payload, cl, s); err == nil {
			return nil
		}
		torn = cl.torn
		cl.torn = false
	}
}

// Go starts a call like Call on a node and returns at once, as Client.Go
// does; Wait gives its result. An attempt that fails is sent again by the
// rules of Options.MaxRetries, to another node when there is one.
func (k *Cluster) Go(ctx context.Context, route string, in, out any) *Future {
	return goTyped(ctx, k, route, in, out)
}

// GoRaw starts a call like CallRaw on a node, as Client.GoRaw does; Reply
// gives its reply once Done. req may be reused once GoRaw returns: a call
// that may be sent again keeps a copy.
func (k *Cluster) GoRaw(ctx context.Context, route string, req []byte) *Future {
	return goRaw(ctx, k, route, req)
}

func (k *Cluster) goCall(ctx context.Context, codec proto.Codec, route string, payload []byte, f *Future) {
	if _, ok := ctx.Deadline(); !ok && k.opts.Timeout > 0 {
		ctx, f.cancel = context.WithTimeout(ctx, k.opts.Timeout)
	}
	h, md, err := engine.Header(ctx, proto.KindRequest, codec, route, payload, &k.hc.opts.Limits)
	if err != nil {
		f.complete(err)
		return
	}
	if k.hedged(route) {
		// A goroutine waits out the delay and takes the first reply, as
		// Call does; payload is the future's own (resends).
		go func() {
			cl := getCall()
			err := k.hedge(ctx, h, route, md, payload, cl)
			if err == nil {
				f.reply = cl.reply
			}
			putCall(cl) // which drops cl.reply, now f's
			f.complete(err)
		}()
		return
	}
	if k.resends() {
		f.k, f.ctx, f.h, f.md, f.payload = k, ctx, h, md, payload
	}
	n, err := k.pick(ctx, route, payload, nil)
	if err != nil {
		if !f.resend(err, false) {
			f.complete(err)
		}
		return
	}
	k.goOn(n, ctx, h, route, md, payload, f)
}

// goOn sends an attempt of a Go call whose header is h on n, which the
// caller picked (and so counted on it).
func (k *Cluster) goOn(n *node, ctx context.Context, h proto.Header, route string, md proto.Metadata, payload []byte, f *Future) {
	f.node, f.sent.last = n, n
	n.c.goStart(ctx, h, route, md, payload, f)
}

func (k *Cluster) codec() handler.Codec     { return k.opts.Codec }
func (k *Cluster) interceptor() Interceptor { return k.icpt }

// resends reports whether a call may be sent more than once: by the retry
// rules, or as a hedged copy.
func (k *Cluster) resends() bool { return k.opts.resends() || k.opts.Hedge.Delay > 0 }

// hedged reports whether calls to route are hedged (Hedge).
func (k *Cluster) hedged(route string) bool {
	return k.opts.Hedge.Delay > 0 && k.opts.Idempotent != nil && k.opts.Idempotent(route)
}

// resend takes over a Go call whose attempt failed with err if the rules
// send it again: a goroutine then sends it, as Call would, and completes
// f. It runs on the goroutine that failed the attempt (a reader), so it
// only decides.
func (k *Cluster) resend(f *Future, err error, torn bool) bool {
	if !(err == k.noNode && k.opts.WaitForReady) && (k.opts.MaxRetries <= 0 || !k.retryable(f.route, err, torn) && !k.redirect(f.route, err, &f.sent)) {
		return false
	}
	go func() {
		cl := getCall()
		err := k.resume(f.ctx, f.h, f.route, f.md, f.payload, cl, &f.sent, err, torn)
		if err == nil {
			f.reply = cl.reply
		}
		putCall(cl) // which drops cl.reply, now f's
		f.complete(err)
	}()
	return true
}

// redirect reports whether a call whose attempt on s.last failed with
// err, NotFound and Unprocessed (that node has no such route), goes to
// another node at once: one that may have it, not yet asked, while
// retries are on.
func (k *Cluster) redirect(route string, err error, s *sending) bool {
	if s.last == nil || k.opts.MaxRetries <= 0 || !misrouted(err) || k.closed.Load() {
		return false
	}
	t := k.tab.Load()
	return s.redirects < len(t.nodes)-1 && t.another(route, s.last)
}

// retryable reports whether a call to route whose attempt failed with err
// may be sent again: the rule of a Client's retries (retryRule), under
// the cluster's options.
func (k *Cluster) retryable(route string, err error, torn bool) bool {
	return retryRule(&k.opts.Options, k.closed.Load(), route, err, torn)
}

// backoff waits before retry n (from 1), as Client's retries do.
func (k *Cluster) backoff(ctx context.Context, route string, n int, last error) error {
	t := time.NewTimer(k.hc.backoff(n - 1))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return waitError(ctx, route, last)
	case <-k.ctx.Done():
		return ErrClosed
	}
}

// awaitNode waits, for a call under WaitForReady that found no usable
// node, until the set of nodes changes, ctx ends or the cluster closes.
// A node whose connection comes back without a change of set is found by
// polling at MinBackoff.
func (k *Cluster) awaitNode(ctx context.Context, route string, last error) error {
	k.mu.Lock()
	ready := k.ready
	k.mu.Unlock()
	t := time.NewTimer(k.opts.MinBackoff)
	defer t.Stop()
	select {
	case <-ready:
	case <-t.C:
	case <-ctx.Done():
		return waitError(ctx, route, last)
	case <-k.ctx.Done():
		return ErrClosed
	}
	return nil
}

// Retries is the number of calls sent again since the cluster was dialled.
func (k *Cluster) Retries() uint64 { return k.retries.Load() }

// Hedges is the number of copies ServiceOptions.Hedge has sent since the
// cluster was dialled.
func (k *Cluster) Hedges() uint64 { return k.hedges.Load() }

// Throttled is the number of failed calls the retry budget
// (ServiceOptions.RetryBudget) has kept from being sent again since the
// cluster was dialled.
func (k *Cluster) Throttled() uint64 { return k.throttled.Load() }
