package reactor

import (
	"sync"
	"time"

	"github.com/valyala/bytebufferpool"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/internal/engine"
	"github.com/rpcd/rpcd/proto"
)

// task is a Blocking call: a copy of its frame (the loop's input buffer is
// reused as soon as the loop moves on) and the Call its handler runs under.
type task struct {
	c       *conn
	rt      *handler.Route
	oneWay  bool
	frame   *bytebufferpool.ByteBuffer // metadata, then payload
	payload int                        // offset of the payload in frame
	zip     proto.Compression          // the payload's, expanded before the handler runs
	room    int                        // what it may expand to
	replyIn proto.Compression          // the reply's, past CompressMin: the connection's when dispatched
	call    handler.Call
}

var taskPool = sync.Pool{New: func() any { return new(task) }}

// dispatch queues a Blocking call for the pool, or refuses it when the
// connection or the pool is at its limit. now is when the frame arrived,
// for its deadline.
func (c *conn) dispatch(rt *handler.Route, f *proto.Frame, out []byte, now time.Time) []byte {
	s := c.s
	t := taskPool.Get().(*task)
	c.mu.Lock()
	if err := c.running.Add(f.ID, &t.call, s.opts.MaxInflight); err != nil {
		c.mu.Unlock()
		taskPool.Put(t)
		return c.refuse(out, f, err.Code, err.Message)
	}
	c.mu.Unlock()

	// Copy the sections the handler reads; the Call's views point into the copy.
	t.c, t.rt, t.oneWay = c, rt, f.Kind == proto.KindOneWay
	t.frame = bytebufferpool.Get()
	var md proto.Metadata
	t.frame.B, md, _ = engine.Copy(t.frame.B, f)
	t.payload = len(f.Metadata)
	t.zip, t.room, t.replyIn = f.Flags.Compression(), f.PayloadRoom(s.opts.Limits.MaxFrameSize), c.zip
	t.call.Remote, t.call.Identity = c.remote, c.identity
	t.call.Peer = c.peer // not Inline: a pool worker may wait for the peer
	engine.Start(&t.call, rt.Name(), &f.Header, md, s.opts.BaseContext, now)

	s.inflight.Add(1)
	select {
	case s.tasks <- t:
		return out
	default:
		s.inflight.Add(-1)
		c.mu.Lock()
		c.running.Remove(f.ID)
		c.mu.Unlock()
		t.release()
		return c.refuse(out, f, proto.CodeResourceExhausted, "blocking pool queue is full")
	}
}

// run executes a task on a pool worker and hands its reply to the loop.
func (t *task) run() {
	c, s := t.c, t.c.s
	buf := bytebufferpool.Get()
	id := t.call.ID
	j := transport.Job{Route: t.rt, Call: &t.call, Req: t.frame.B[t.payload:], OneWay: t.oneWay, Zip: t.replyIn}
	var zbuf *[]byte
	if err := t.call.Err(); err != nil { // cancelled, or past its deadline, while queued: never run
		j.Err = &handler.Error{Code: handler.CodeOf(err), Message: "call " + t.call.Route + " ended before it ran: " + err.Error(), Unprocessed: true}
	} else if t.zip != proto.CompressionNone {
		var err *handler.Error
		zbuf = compression.GetBuffer()
		if j.Req, err = engine.ExpandRequest(*zbuf, j.Req, t.zip, t.room); err != nil {
			j.Err = err
		}
	}
	out, _ := s.run.Run(&j, buf.B[:0]) // Large 0: the whole reply in out
	if zbuf != nil {
		compression.PutBuffer(zbuf, j.Req)
	}

	c.mu.Lock()
	c.running.Remove(id) // with the reply queued, under the same lock: owes never sees neither
	wake := false
	if len(out) > 0 && !c.closed.Load() {
		c.replies = append(c.replies, out...)
		wake = !c.woken
		c.woken = true
	}
	c.mu.Unlock()
	buf.B = out
	bytebufferpool.Put(buf)
	t.release()
	s.inflight.Add(-1)
	if wake {
		c.wake()
	}
}

func (t *task) release() {
	reusable := t.call.End()
	bytebufferpool.Put(t.frame)
	t.c, t.rt, t.oneWay, t.frame, t.payload = nil, nil, false, nil, 0
	t.zip, t.replyIn = proto.CompressionNone, proto.CompressionNone
	if reusable { // else contexts derived from t.call may still look at it
		t.call.Remote, t.call.Identity, t.call.Peer = nil, nil, nil
		taskPool.Put(t)
	}
}

// worker runs tasks until the queue closes.
func (s *Server) worker() {
	defer s.workers.Done()
	for t := range s.tasks {
		t.run()
	}
}
