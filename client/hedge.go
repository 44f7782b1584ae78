package client

import (
	"context"
	"time"

	"github.com/rpcd/rpcd/internal/engine"
	"github.com/rpcd/rpcd/proto"
)

// Hedge is ServiceOptions.Hedge: a call to an idempotent route (one
// Options.Idempotent names) that has no reply within Delay is sent again,
// as it is, to a second node, and the first reply of the two is the
// call's; the other copy is cancelled, its server told. It trims the tail
// of a service's latency (a node in a pause, a slow disk) at the cost of
// the copies: at most one per call, and only for the calls slower than
// Delay, so a Delay near the route's 95th or 99th percentile sends a copy
// for one call in 20 or 100. Call, CallRaw, Go and GoRaw are hedged alike;
// a hedged future costs a goroutine that waits for its copies.
type Hedge struct {
	// Delay is how long a call waits for its first node before its copy
	// goes to a second; 0, the default, hedges nothing.
	Delay time.Duration
}

// hedge sends a call to a node and, when no reply has come within
// Hedge.Delay, a copy to another node, and takes the first reply. A copy
// that fails by an error the retry rules would send again leaves the
// other to answer; any other error is the call's at once. Once every
// copy has failed so, the call is sent again by the retry rules, as any
// call is. The copies are futures that do not send themselves again: the
// caller's payload is only theirs until this returns.
func (k *Cluster) hedge(ctx context.Context, h proto.Header, route string, md proto.Metadata, payload []byte, cl *call) error {
	firstNode, err := k.pick(ctx, route, payload, nil)
	if err != nil {
		return k.resume(ctx, h, route, md, payload, cl, &sending{}, err, false)
	}
	hctx, cancel := context.WithCancel(ctx)
	defer cancel() // the copy still out, if any, ends: its server gets a Cancel
	first := &Future{done: make(chan struct{}), route: route}
	k.goOn(firstNode, hctx, h, route, md, payload, first)
	var second *Future
	var secondNode *node
	firstDone, secondDone := first.done, (<-chan struct{})(nil)
	delay := time.NewTimer(k.opts.Hedge.Delay)
	defer delay.Stop()
	wait := delay.C
	for firstDone != nil || secondDone != nil {
		var f *Future
		select {
		case <-firstDone:
			f, firstDone = first, nil
		case <-secondDone:
			f, secondDone = second, nil
		case <-wait:
			wait = nil
			var ok bool
			if h.Deadline, ok = engine.DeadlineField(ctx); !ok {
				continue // its time is up: the first copy ends with its context
			}
			n, err := k.pickFor(ctx, route, payload, firstNode, false)
			if err != nil || n == firstNode {
				if n != nil {
					n.release()
				}
				continue // no second node to send a copy to
			}
			k.hedges.Add(1)
			second, secondNode = &Future{done: make(chan struct{}), route: route}, n
			k.goOn(n, hctx, h, route, md, payload, second)
			secondDone = second.done
			continue
		}
		if f.err == nil {
			cl.reply = append(cl.reply, f.reply...)
			return nil
		}
		err = f.err
		if !k.retryable(route, err, false) && !misrouted(err) {
			return err // a server's answer, or the call's context ended
		}
		if wait != nil {
			break // the first failed before its delay: the retry rules take over
		}
	}
	last := firstNode
	if secondNode != nil {
		last = secondNode
	}
	s := sending{last: last, ran: true}
	return k.resume(ctx, h, route, md, payload, cl, &s, err, false)
}
