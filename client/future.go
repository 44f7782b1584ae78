package client

import (
	"bytes"
	"context"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/internal/engine"
	"github.com/rpcd/rpcd/proto"
)

// Future is a call in flight, started by Go or GoRaw.
type Future struct {
	done   chan struct{}
	err    error
	reply  []byte
	out    any
	codec  handler.Codec // of a Go call: its reply's
	route  string
	stop   func() bool        // unregisters the context watch
	cancel context.CancelFunc // releases the Timeout context, if any

	// What it takes to send the call again; c and k are nil when it is not
	// sent more than once.
	c       *Client
	ctx     context.Context
	h       proto.Header
	md      proto.Metadata
	payload []byte

	// A call through a Cluster: the cluster, which sends it again; the
	// node of the attempt in flight, released when the attempt ends; and
	// where its sending stands.
	k    *Cluster
	node *node
	sent sending
}

// Go starts a call like Call and returns at once; Wait gives its result.
// The call ends when its reply comes, its context ends, or it fails and is
// not sent again (see Options.MaxRetries).
func (c *Client) Go(ctx context.Context, route string, in, out any) *Future {
	return goTyped(ctx, c, route, in, out)
}

// GoRaw starts a call like CallRaw; Reply gives its reply once Done. req
// may be reused once GoRaw returns: a call that may be sent again keeps a
// copy.
func (c *Client) GoRaw(ctx context.Context, route string, req []byte) *Future {
	return goRaw(ctx, c, route, req)
}

// goTyped is Go for either sender.
func goTyped(ctx context.Context, s sender, route string, in, out any) *Future {
	f := &Future{done: make(chan struct{}), out: out, route: route, codec: s.codec()}
	if err := transport.RefuseWait(ctx, "calling", route); err != nil {
		f.complete(err) // its Wait would stall the loop, and the call ends with the handler
		return f
	}
	payload, err := transport.AppendArgWith(f.codec, nil, in)
	if err != nil {
		f.complete(err)
		return f
	}
	if s.interceptor() != nil {
		goVia(ctx, s, f.codec.ID(), route, payload, f)
		return f
	}
	s.goCall(ctx, f.codec.ID(), route, payload, f)
	return f
}

// goRaw is GoRaw for either sender.
func goRaw(ctx context.Context, s sender, route string, req []byte) *Future {
	f := &Future{done: make(chan struct{}), route: route}
	if err := transport.RefuseWait(ctx, "calling", route); err != nil {
		f.complete(err)
		return f
	}
	if s.interceptor() != nil {
		goVia(ctx, s, proto.CodecRaw, route, bytes.Clone(req), f)
		return f
	}
	if s.resends() {
		req = bytes.Clone(req)
	}
	s.goCall(ctx, proto.CodecRaw, route, req, f)
	return f
}

func (c *Client) goCall(ctx context.Context, codec proto.Codec, route string, payload []byte, f *Future) {
	if _, ok := ctx.Deadline(); !ok && c.opts.Timeout > 0 {
		ctx, f.cancel = context.WithTimeout(ctx, c.opts.Timeout)
	}
	h, md, err := engine.Header(ctx, proto.KindRequest, codec, route, payload, &c.opts.Limits)
	if err != nil {
		f.complete(err)
		return
	}
	if c.resends() {
		f.c, f.ctx, f.h, f.md, f.payload = c, ctx, h, md, payload
	}
	c.goStart(ctx, h, route, md, payload, f)
}

// goStart sends one attempt of a Go call whose header is h; its reply,
// its failure or the end of ctx ends the attempt and completes f, or hands
// it to f.resend.
func (c *Client) goStart(ctx context.Context, h proto.Header, route string, md proto.Metadata, payload []byte, f *Future) {
	cl := &call{fut: f}
	w, err := c.start(ctx, h, route, md, payload, cl)
	if err != nil {
		if !f.resend(err, false) {
			f.complete(err)
		}
		return
	}
	w.needRead()
	f.stop = context.AfterFunc(ctx, func() {
		if w.forget(cl) {
			w.abandon(cl.id)
			f.complete(engine.ContextError(ctx.Err(), route))
		}
	})
	select {
	case <-f.done: // completed before the watch was set
		f.stop()
	default:
	}
}

// complete records the result and releases the future's context.
func (f *Future) complete(err error) {
	f.endAttempt(err)
	f.err = err
	if f.cancel != nil {
		f.cancel()
	}
	close(f.done)
}

// endAttempt uncounts the attempt that ended with err from its Cluster
// node's calls in flight, and counts err in the node's breaker.
func (f *Future) endAttempt(err error) {
	if n := f.node; n != nil {
		f.node = nil
		n.release()
		n.record(err)
		if err != nil {
			n.noteMisrouted(f.route, err)
		}
	}
}

// Done returns a channel closed when the call has completed.
func (f *Future) Done() <-chan struct{} { return f.done }

// Wait waits for the call and returns its error; for Go, it decodes the
// reply into the out given.
func (f *Future) Wait() error {
	<-f.done
	if f.stop != nil {
		f.stop()
	}
	if f.err != nil {
		return transport.Received(f.err)
	}
	return transport.DecodeReplyWith(f.codec, f.route, f.reply, f.out)
}

// Reply returns the reply payload once the call has completed without error.
func (f *Future) Reply() []byte {
	<-f.done
	return f.reply
}
