package reactor

import (
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/internal/engine"
	"github.com/rpcd/rpcd/proto"
)

// conn is the server's state for one connection. Fields above mu belong to
// the goroutine serving the connection (its event loop, or its own
// goroutine once std is set); those below are shared with the blocking
// pool and whoever sends to the connection.
type conn struct {
	s      *Server
	id     uint64    // its number among the server's connections, from 1, for a tap
	gc     gnet.Conn // its event loop's connection, if it began on one; nil otherwise
	remote net.Addr
	call   *handler.Call // reused by inline calls, one at a time, while End allows
	routes handler.RouteCache

	lastID    uint32 // greatest call id taken in, named by GoAway
	goingAway bool   // GoAway sent: new calls are refused
	authed    bool   // the handshake is done, or none is needed
	greeted   bool   // a Hello or another frame but Ping came: no Hello may follow
	identity  *handler.Identity
	zip       proto.Compression // replies are compressed so, past Options.CompressMin; set by the Hello

	big       []byte       // a large frame being gathered (see bigFrame)
	bigHeader proto.Header // its header, accepted
	lost      bool         // a write failed: the connection ends, and nothing more is written

	held     []byte // output the socket did not take; on a loop, handed to the goroutine the connection moves to (handoff.go)
	more     bool   // readFrames stopped at the high-water mark: whole frames may be left
	peerDone bool   // the peer has shut down its side (a FIN): nothing more is read

	inboundLeft int // bytes left buffered at the end of the last wake-up

	tapOn   *tapSet // the server's tap when the connection last looked (tap.go)
	tapOK   bool    // tapOn records the connection: it took it (TapOpen) and has not closed it
	tapSkip int     // the first bytes of the next write the tap has seen: output held at a hand-off

	subs   map[uint32]*subscription // the connection's subscriptions, by id
	topics handler.TopicAccess      // where it may publish and subscribe (Options.Topics); set at its first Publish or Subscribe
	unread atomic.Int64             // output being written that the peer has not taken yet, for publishers
	fan    fanout                   // the Messages this connection's publishes make, until the wake-up ends

	// std is the connection's own goroutine's link, once it has one: from
	// the start on the standard library transport (TLS), or since it left
	// its event loop (handoff.go). Whoever wakes the connection reads it.
	std atomic.Pointer[stdLink]

	// Shared with the sweeper, times from Server.clock.
	lastRead   atomic.Int64 // when bytes last arrived
	frameStart atomic.Int64 // when the frame now arriving began; 0 if none
	pingSent   atomic.Int64 // when the sweeper asked for a Ping; 0 if none is out
	openedAt   int64        // when the connection opened; set before the sweeper sees it
	maxAge     int64        // how long it may be served (Options.MaxConnAge, jittered), in ns; 0 for ever; set with openedAt
	aged       atomic.Bool  // the sweeper found it past maxAge: the loop sends a GoAway
	authedAt   atomic.Int64 // not 0 once authed
	wantPing   atomic.Bool  // the loop sends a Ping at its next wake-up
	ending     atomic.Pointer[ending]

	peerGoingAway atomic.Bool // the client sent its GoAway: it starts nothing more, and the server calls it no more

	closed atomic.Bool
	tapped atomic.Bool // tapOK, for SetTap

	// Bytes read and written, for Server.Stats: the connection's own
	// counters rather than the server's, so that event loops on different
	// cores never write one cache line at every wake-up.
	bytesIn, bytesOut atomic.Uint64

	peer *Peer // the connection for handlers and server push; set once

	lw *loopWatch // the watch of what its loop, or its goroutine, runs inline (watchdog.go)

	streams engine.Streams // open streams (stream.go)

	mu        sync.Mutex
	replies   []byte                  // frames for the loop to write: the blocking pool's replies, the server's own calls
	woken     bool                    // a Wake is pending for replies
	running   engine.Running          // blocking calls queued or running, by id (pool.go)
	peerCalls *engine.Calls[peerCall] // the server's calls to the client, waiting for replies; made at the first (peer.go)
	room      chan struct{}           // closed when the loop takes the outbox, for stream writers waiting for room in it; nil if none waits
}

func newConn(s *Server, gc gnet.Conn, remote net.Addr) *conn {
	c := &conn{s: s, gc: gc, remote: remote, id: s.connSeq.Add(1)}
	c.peer = &Peer{c: c}
	c.streams.Init(s.streamCfg, (*connLink)(c))
	c.newInlineCall()
	c.openedAt = s.clock.Load()
	c.maxAge = s.opts.maxConnAge()
	if s.opts.Authenticator == nil {
		c.authed = true
		c.authedAt.Store(1)
	}
	return c
}

// newInlineCall gives the connection a fresh Call for its inline handlers.
func (c *conn) newInlineCall() {
	c.call = &handler.Call{Remote: c.remote, Identity: c.identity, Peer: c.peer, Inline: true}
}

// ending is why the sweeper ends a connection: the loop sends a GoAway with
// it, then closes.
type ending struct {
	code proto.Code
	msg  string
}

// handleFrame acts on one whole frame and appends what it answers to out.
// now is the time the loop woke, for relative deadlines.
// A non-nil ending means the connection must end with a GoAway.
func (c *conn) handleFrame(f *proto.Frame, out []byte, now time.Time) ([]byte, *ending) {
	if !c.authed {
		return c.beforeAuth(f, out)
	}
	if !c.greeted && f.Kind != proto.KindPing && f.Kind != proto.KindHello {
		c.greeted = true // a Hello from here on is a protocol error
	}
	switch f.Kind {
	case proto.KindRequest, proto.KindOneWay:
		if c.peerGoingAway.Load() {
			return out, afterGoAway(f.Kind)
		}
		if len(c.fan.order) > 0 {
			c.fan.flush() // what this connection published goes before anything its handlers publish
		}
		return c.handleCall(f, out, now), nil
	case proto.KindCancel:
		c.cancel(f.ID)
	case proto.KindPing:
		return proto.AppendPong(out, f.Payload), nil
	case proto.KindHello:
		if c.greeted {
			return out, &ending{proto.CodeInternal, "rpcd: protocol error: a Hello that is not the connection's first frame"}
		}
		c.greeted = true
		return c.welcome(out, f, ""), nil // nothing to check: any first Hello is welcome
	case proto.KindGoAway:
		// The peer starts nothing more: the server makes no more calls to
		// it either. Calls in flight both ways are still answered.
		c.peerGoingAway.Store(true)
	case proto.KindResponse, proto.KindError:
		c.answered(f) // to a call the server made (Peer.Call)
	case proto.KindSubscribe:
		if c.peerGoingAway.Load() {
			return out, afterGoAway(f.Kind)
		}
		return c.subscribe(f, out)
	case proto.KindUnsubscribe:
		c.unsubscribe(f.ID)
	case proto.KindPublish:
		if c.peerGoingAway.Load() {
			return out, afterGoAway(f.Kind)
		}
		if c.s.opts.Topics != nil && !c.access().MayPublish(f.Route) {
			return c.refusePublish(f, out), nil
		}
		c.s.publish(f.Route, f.Codec, f.Payload, &c.fan)
	case proto.KindMessage:
		return out, &ending{proto.CodeInternal, "rpcd: protocol error: a Message frame from a client"}
	case proto.KindWelcome:
		return out, &ending{proto.CodeInternal, "rpcd: protocol error: a Welcome frame from a client"}
	case proto.KindStreamOpen, proto.KindStreamData, proto.KindStreamCredit, proto.KindStreamEnd, proto.KindStreamReset:
		if f.Kind == proto.KindStreamOpen && c.peerGoingAway.Load() {
			return out, afterGoAway(f.Kind)
		}
		var err error
		if out, err = c.streams.Handle(f, out); err != nil {
			return out, &ending{proto.CodeInternal, err.Error()}
		}
	case proto.KindPong:
		// An answer to a Ping the sweeper sent: the bytes' arrival was
		// what it waited for.
	}
	return out, nil
}

// afterGoAway is the protocol error of a frame that starts something (a
// call, a stream, a subscription, a publish) after its sender's GoAway.
func afterGoAway(k proto.Kind) *ending {
	return &ending{proto.CodeInternal, "rpcd: protocol error: a " + k.String() + " after the client's GoAway"}
}

// beforeAuth acts on a frame of a connection that has not authenticated:
// its Hello, or a Ping; anything else ends it.
func (c *conn) beforeAuth(f *proto.Frame, out []byte) ([]byte, *ending) {
	switch f.Kind {
	case proto.KindPing:
		return proto.AppendPong(out, f.Payload), nil
	case proto.KindHello:
	default:
		return out, &ending{proto.CodeUnauthenticated, "the connection has not authenticated"}
	}
	method, _ := f.Metadata.Get(proto.MetaAuthMethod)
	id, err := c.s.opts.Authenticator.Authenticate(c.s.opts.BaseContext, string(method), f.Payload)
	if err != nil {
		c.s.log.Info("rpcd: authentication refused", "remote", c.remote, "method", string(method), "err", err)
		return out, &ending{proto.CodeUnauthenticated, handler.MessageOf(err)}
	}
	c.authed = true
	c.greeted = true
	c.identity = id
	c.call.Identity = id
	c.peer.identity.Store(id)
	c.authedAt.Store(1) // after the identity: Server.Peers lists the connection from here
	subject := ""
	if id != nil {
		subject = id.Subject
	}
	return c.welcome(out, f, subject), nil
}

// handleCall answers a Request or one-way call: refused, queued for the
// blocking pool, or run inline by the server's runner (transport.Runner),
// which the watchdog watches through c.lw.
func (c *conn) handleCall(f *proto.Frame, out []byte, now time.Time) []byte {
	oneWay := f.Kind == proto.KindOneWay
	c.tookIn(f.ID)
	if c.goingAway {
		return c.refuse(out, f, proto.CodeUnavailable, c.awayReason())
	}
	rt := c.s.reg.LookupCached(f.Route, &c.routes)
	if rt == nil {
		return c.refuse(out, f, proto.CodeNotFound, "no route "+string(f.Route))
	}
	if rt.IsBlocking() {
		return c.dispatch(rt, f, out, now) // a compressed payload is expanded on the pool
	}
	payload := f.Payload
	var zbuf *[]byte // the pooled buffer a compressed payload is expanded into
	if z := f.Flags.Compression(); z != proto.CompressionNone {
		var err *handler.Error
		zbuf = compression.GetBuffer()
		if payload, err = engine.ExpandRequest(*zbuf, f.Payload, z, f.PayloadRoom(c.s.opts.Limits.MaxFrameSize)); err != nil {
			compression.PutBuffer(zbuf, payload)
			return c.refuse(out, f, err.Code, err.Message)
		}
	}

	if n := len(payload); n > bigFrame && cap(out)-len(out) < proto.HeaderSize+n {
		// Room for a reply as large as the request (a handler that copies
		// it) before the handler appends it: one copy, not one per growth step.
		out = slices.Grow(out, proto.HeaderSize+n)
	}
	call := c.call
	engine.Start(call, rt.Name(), &f.Header, f.Metadata, c.s.opts.BaseContext, now)
	// Field by field: a composite literal of a variable whose address is
	// taken is built in a temporary and copied, a copy that stalls on the
	// stores just made to the temporary (BenchmarkDirect: 10 % of a call).
	var j transport.Job
	j.Route, j.Call, j.Req, j.OneWay, j.Zip, j.Large, j.Watch = rt, call, payload, oneWay, c.zip, bigFrame, c.lw.running(c)
	out, own := c.s.run.Run(&j, out)
	if !call.End() {
		c.newInlineCall() // the handler took Done: contexts derived from call may outlive it
	}
	if own != nil {
		out = c.writeOwn(out, own) // written before the buffer own may be in is reused
	}
	if zbuf != nil {
		compression.PutBuffer(zbuf, payload)
	}
	return out
}

// tookIn records the call id of a call taken in, for GoAway: the greatest
// so far (a client's ids can arrive out of order).
func (c *conn) tookIn(id uint32) {
	if c.lastID == 0 || proto.After(id, c.lastID) {
		c.lastID = id
	}
}

// refuse answers a call the server will not run with an Unprocessed Error.
func (c *conn) refuse(out []byte, f *proto.Frame, code proto.Code, msg string) []byte {
	if f.Kind == proto.KindOneWay {
		c.s.log.Debug("rpcd: one-way call refused", "remote", c.remote, "route", string(f.Route), "code", code)
		return out
	}
	c.s.stats.callRefused(code)
	return proto.AppendError(out, f.ID, proto.FlagUnprocessed, code, msg)
}

// cancel cancels a blocking call in flight. Inline calls finish before the
// loop reads the next frame, so they are never found here.
func (c *conn) cancel(id uint32) {
	c.mu.Lock()
	c.running.Cancel(id)
	c.mu.Unlock()
}

// goAway appends the connection's GoAway and refuses calls from now on.
func (c *conn) goAway(out []byte) []byte {
	c.goingAway = true
	return proto.AppendGoAway(out, c.lastID, proto.CodeUnavailable, c.awayReason())
}

// awayReason is why the connection goes away: the server drains, or the
// connection is past its maximum age (sweep.go).
func (c *conn) awayReason() string {
	if c.s.draining.Load() || !c.aged.Load() {
		return "server is draining"
	}
	return msgAged
}

// unlockAndWake ends a hand-over to the loop: with c.mu held and frames
// appended to c.replies, it unlocks c.mu and wakes the connection's loop
// unless a wake is already pending, so that any number of frames queued
// before the loop runs cost one wake and leave in one write.
func (c *conn) unlockAndWake() {
	wake := !c.woken
	c.woken = true
	c.mu.Unlock()
	if wake {
		c.wake()
	}
}

// takeReplies moves the outbox onto out: the blocking pool's replies and the
// frames the server sends on its own (pushes, calls, Messages, stream data).
func (c *conn) takeReplies(out []byte) []byte {
	c.mu.Lock()
	out = append(out, c.replies...)
	if cap(c.replies) > 64<<10 && !c.keepOutbox() {
		c.replies = nil // do not keep a large reply's buffer per connection
	} else {
		c.replies = c.replies[:0]
	}
	c.woken = false
	c.outboxTaken()
	c.mu.Unlock()
	return out
}

// closeCalls cancels the blocking calls of a closed connection and ends
// its subscriptions.
func (c *conn) closeCalls() {
	c.closed.Store(true)
	c.dropSubscriptions()
	c.mu.Lock()
	c.running.Close()
	c.failPeerCalls()
	c.replies = nil
	c.outboxTaken() // stream writers waiting for room see the connection closed
	c.mu.Unlock()
	c.streams.Close()
}
