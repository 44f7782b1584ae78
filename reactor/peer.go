package reactor

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/internal/engine"
	"github.com/rpcd/rpcd/proto"
)

// The server's side of reverse calls and server push: frames the server
// sends on its own, not as replies. Whatever goroutine sends them (a
// handler on the loop, a pool worker, any goroutine of the program)
// appends them to the connection's outbox (conn.replies, which the blocking
// pool's replies also use) and wakes its loop, which writes them with the
// rest of that wake-up's output: many pushes to one connection leave in one
// write. Replies to the server's calls arrive on the loop (handleFrame) and
// complete the waiting caller.

// Peer is a server's handle on one client connection: its handlers find it
// in handler.Call.Peer, and Server.Peers lists every connection's. Calls
// through it go to the handlers the client registered (client.Options.
// Handler) on the same connection. It implements handler.Peer; once the
// connection closes, its methods fail with Unavailable.
type Peer struct {
	c        *conn
	identity atomic.Pointer[handler.Identity]
}

// peerCall is a call the server made to a client, waiting for its reply.
// Whoever takes it out of conn.peerCalls (the loop on its answer, the
// connection's close, the caller whose context ended) completes it.
type peerCall struct {
	id    uint32
	reply []byte // the caller's buffer, which the reply is appended to
	err   error
	done  chan struct{} // closed once reply or err is set
}

// Remote is the client's address.
func (p *Peer) Remote() net.Addr { return p.c.remote }

// Identity is who the connection authenticated as; nil if it did not.
func (p *Peer) Identity() *handler.Identity { return p.identity.Load() }

// Call sends in, encoded by Options.Codec (JSON by default), to route on
// the client and decodes its reply into out; see handler.Peer.
func (p *Peer) Call(ctx context.Context, route string, in, out any) error {
	codec := p.c.s.opts.Codec
	payload, err := transport.AppendArgWith(codec, nil, in)
	if err != nil {
		return err
	}
	reply, err := p.call(ctx, route, codec.ID(), payload, nil)
	if err != nil {
		return transport.Received(err)
	}
	return transport.DecodeReplyWith(codec, route, reply, out)
}

// CallRaw sends req to route on the client and appends its reply to reply.
func (p *Peer) CallRaw(ctx context.Context, route string, req, reply []byte) ([]byte, error) {
	reply, err := p.call(ctx, route, proto.CodecRaw, req, reply)
	return reply, transport.Received(err)
}

// Notify sends in, encoded by Options.Codec (JSON by default), to route on
// the client, one way: it returns once the message is queued for the
// connection.
func (p *Peer) Notify(ctx context.Context, route string, in any) error {
	codec := p.c.s.opts.Codec
	payload, err := transport.AppendArgWith(codec, nil, in)
	if err != nil {
		return err
	}
	return transport.Received(p.notify(ctx, route, codec.ID(), payload))
}

// NotifyRaw sends req to route on the client, one way.
func (p *Peer) NotifyRaw(ctx context.Context, route string, req []byte) error {
	return transport.Received(p.notify(ctx, route, proto.CodecRaw, req))
}

func (p *Peer) notify(ctx context.Context, route string, codec proto.Codec, payload []byte) error {
	h, md, err := engine.Header(ctx, proto.KindOneWay, codec, route, payload, &p.c.s.opts.Limits)
	if err != nil {
		return err
	}
	return p.c.send(h, route, md, payload, nil)
}

func (p *Peer) call(ctx context.Context, route string, codec proto.Codec, payload, reply []byte) ([]byte, error) {
	if err := transport.RefuseWait(ctx, "calling the peer's", route); err != nil {
		return reply, err // Notify, which does not wait, works inline
	}
	c := p.c
	h, md, err := engine.Header(ctx, proto.KindRequest, codec, route, payload, &c.s.opts.Limits)
	if err != nil {
		return reply, err
	}
	pc := &peerCall{reply: reply, done: make(chan struct{})}
	if err := c.send(h, route, md, payload, pc); err != nil {
		return reply, err
	}
	select {
	case <-pc.done:
		return pc.reply, pc.err
	case <-ctx.Done():
	}
	if !c.peerCalls.Forget(pc.id, pc) { // the reply is being delivered: take it
		<-pc.done
		return pc.reply, pc.err
	}
	_ = c.send(proto.Header{Kind: proto.KindCancel, ID: pc.id}, "", nil, nil, nil)
	return reply, engine.ContextError(ctx.Err(), route)
}

// send queues a frame the server sends on its own, with metadata md: with
// pc, a Request that waits for its reply there. It fails if the connection
// is gone, or if its client leaves more than MaxOutbound bytes of them
// unwritten.
func (c *conn) send(h proto.Header, route string, md proto.Metadata, payload []byte, pc *peerCall) error {
	n := proto.HeaderSize + len(route) + len(md) + len(payload)
	c.mu.Lock()
	switch {
	case c.closed.Load():
		c.mu.Unlock()
		return errPeerGone
	case c.peerGoingAway.Load() && h.Kind != proto.KindCancel:
		c.mu.Unlock()
		return errPeerGoingAway
	case len(c.replies)+n > c.s.opts.MaxOutbound:
		c.mu.Unlock()
		return errPeerSlow
	}
	if h.Kind == proto.KindRequest || h.Kind == proto.KindOneWay {
		if c.peerCalls == nil {
			c.peerCalls = engine.NewCalls[peerCall](1)
		}
		if pc != nil {
			h.ID = c.peerCalls.Add(pc, &pc.id)
		} else {
			h.ID = c.peerCalls.FreeID()
		}
	}
	c.replies = proto.AppendFrame(c.replies, h, route, md, payload)
	c.unlockAndWake()
	return nil
}

var (
	errPeerGone      = &handler.Error{Code: proto.CodeUnavailable, Message: "the connection is closed", Unprocessed: true}
	errPeerGoingAway = &handler.Error{Code: proto.CodeUnavailable, Message: "the client is going away (it sent a GoAway)", Unprocessed: true}
	errPeerSlow      = &handler.Error{Code: proto.CodeResourceExhausted, Message: "the peer is not reading: too much is queued for it", Unprocessed: true}
	errPeerLost      = &handler.Error{Code: proto.CodeUnavailable, Message: "connection lost while the call was out"}
)

// answered completes the server's call that a Response or Error frame
// answers; answers to calls no longer waiting are dropped.
func (c *conn) answered(f *proto.Frame) {
	c.mu.Lock()
	calls := c.peerCalls
	c.mu.Unlock()
	if calls == nil {
		return
	}
	if pc := calls.Take(f.ID); pc != nil {
		pc.reply, pc.err = engine.Answer(f, pc.reply, c.s.opts.Limits.MaxFrameSize)
		close(pc.done)
	}
}

// failPeerCalls fails the server's calls still waiting on a closed
// connection, with c.mu held.
func (c *conn) failPeerCalls() {
	if c.peerCalls == nil {
		return
	}
	for _, pc := range c.peerCalls.Close() {
		pc.err = errPeerLost
		close(pc.done)
	}
}

// Peers returns a handle on every open connection that has authenticated
// (or needs not), for server push: Notify on each, or on a set of them.
func (s *Server) Peers() []*Peer {
	conns := s.snapshot(nil)
	peers := make([]*Peer, 0, len(conns))
	for _, c := range conns {
		if c.authedAt.Load() != 0 {
			peers = append(peers, c.peer)
		}
	}
	return peers
}

// Broadcast sends a one-way message to route on every connection that has
// authenticated, payload labelled with codec (handler.JSON.Append encodes
// a value), and returns how many connections it was queued for. A
// connection whose client does not keep up (MaxOutbound unwritten) misses
// it.
func (s *Server) Broadcast(route string, codec proto.Codec, payload []byte) int {
	h, _, err := engine.Header(context.Background(), proto.KindOneWay, codec, route, payload, &s.opts.Limits)
	if err != nil {
		return 0
	}
	n := 0
	for _, p := range s.Peers() {
		if p.c.send(h, route, nil, payload, nil) == nil {
			n++
		}
	}
	return n
}
