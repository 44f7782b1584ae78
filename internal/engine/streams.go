package engine

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/internal/stream"
	"github.com/rpcd/rpcd/proto"
)

// StreamConfig is what every connection of one side shares about its
// streams (docs/streams.md). Set it before the first connection and
// change it no more.
type StreamConfig struct {
	// Client is set on the client's side: the streams it opens have odd
	// ids, the server's even ones.
	Client bool
	// Window is the receive window this end grants each stream; 0 for
	// stream.DefaultWindow.
	Window int
	// MaxOpened bounds the streams this end opened that are open at once
	// on a connection; 0 for no bound (the peer's MaxAccepted is one).
	MaxOpened int
	// MaxAccepted bounds the streams the peer opened that are open at
	// once on a connection; past it a StreamOpen is refused.
	MaxAccepted int
	// Limits are the connection's: a StreamOpen's metadata is held to
	// MaxMetadata, a StreamData's expansion to MaxFrameSize.
	Limits proto.Limits

	// Registry has the stream routes the peer may open; nil for none.
	Registry *handler.Registry
	// Runner runs their handlers.
	Runner *transport.Runner
	// Base supplies the values (Value) a stream handler's context carries.
	Base context.Context

	// Takes are the compressions this end names for the peer's data (in
	// its StreamOpen's metadata, or its first StreamCredit); nil for none.
	Takes []proto.Compression
	// Zip is what this end compresses its data in once the peer names it;
	// CompressionNone for the first the peer names (the server's rule: the
	// client's order of preference decides). ZipMin is the smallest data
	// compressed; negative for never (this end sends its data as it is).
	Zip    proto.Compression
	ZipMin int
}

// A StreamHost is one connection's end as its streams need it: the link
// their frames go out on, and the side's own rules.
type StreamHost interface {
	stream.Link
	// OpenErr is why this end may open no stream on the connection now
	// (it is closed, the peer is going away); nil if it may. It is called
	// with the table's lock held and must not take it.
	OpenErr() error
	// AcceptErr is why a stream the peer opens is refused now (this end
	// is draining, or closing); nil if it may start. Called as OpenErr is.
	AcceptErr() *handler.Error
	// NewCall returns a Call for the handler of a stream the peer opens,
	// with the connection's fields set (Remote, Identity, Peer).
	NewCall() *handler.Call
	// Go runs a stream handler on a goroutine of its own, counted where
	// the side waits for its handlers; false if none may start any more.
	// The handler may send at once, and its first frames must not overtake
	// what Handle appended to out (the stream's first StreamCredit): a
	// side whose link can send before out is written starts run only once
	// out is queued.
	Go(run func()) bool
	// Refused counts a stream the peer opened that this end refused with
	// code.
	Refused(code proto.Code)
}

// Streams is one connection's open streams, by id, and the steps that
// open them, accept those the peer opens, move the peer's frames into
// them and forget them, whichever end the connection is. Each stream's
// own state (window, credit, ends) is a stream.Stream's.
type Streams struct {
	cfg  *StreamConfig
	host StreamHost

	mu       sync.Mutex
	m        map[uint32]*stream.Stream
	closed   bool   // the connection is gone: no new streams
	nextID   uint32 // the last id this end gave a stream it opened
	opened   int    // streams this end opened, open
	accepted int    // streams the peer opened, open
	open     atomic.Int32
}

// Init sets the table's side and connection, before its first use.
func (t *Streams) Init(cfg *StreamConfig, host StreamHost) {
	t.cfg, t.host = cfg, host
}

// Open reports the number of streams open, without a lock.
func (t *Streams) Open() int { return int(t.open.Load()) }

// window is the receive window this end grants.
func (t *Streams) window() int {
	if t.cfg.Window > 0 {
		return t.cfg.Window
	}
	return stream.DefaultWindow
}

var errTooManyStreams = &handler.Error{Code: proto.CodeResourceExhausted, Message: "too many streams open on this connection", Unprocessed: true}

// Start opens a stream to the peer's stream route, its StreamOpen carrying
// deadline (the Deadline field) and md, after what this end Takes; ctx
// governs the whole stream (stream.Stream.Watch). The StreamOpen is
// queued on the link before Start returns: the first Write waits for the
// peer's credit, and a refusal arrives as a reset.
func (t *Streams) Start(ctx context.Context, route string, deadline uint32, md proto.Metadata) (*stream.Stream, error) {
	if len(t.cfg.Takes) > 0 {
		// First, so that a key of the caller's own does not stand in for it.
		md = append(proto.AppendMetadata(nil, proto.MetaCompression, proto.AppendCompressionList(nil, t.cfg.Takes...)), md...)
	}
	if len(md) > t.cfg.Limits.MaxMetadata {
		return nil, &handler.Error{Code: proto.CodeResourceExhausted, Message: "metadata exceeds the limit", Unprocessed: true}
	}
	window := t.window()
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.host.OpenErr(); err != nil {
		return nil, err
	}
	if t.closed {
		return nil, stream.ErrConnLost
	}
	if t.cfg.MaxOpened > 0 && t.opened >= t.cfg.MaxOpened {
		return nil, errTooManyStreams
	}
	id := t.newID()
	st := stream.New(id, true, t.host, ctx, window, 0)
	t.addLocked(st)
	t.opened++
	// Under t.mu, so that no reset of this stream can go out before it.
	if err := t.host.SendControl(proto.AppendStreamOpen(nil, id, route, proto.CodecRaw, deadline, md, uint32(window))); err != nil {
		t.forgetLocked(st)
		return nil, err
	}
	st.Watch()
	return st, nil
}

// newID returns an id for a stream this end opens, with t.mu held: odd
// for the client, even (never 0) for the server, and not in use.
func (t *Streams) newID() uint32 {
	for {
		t.nextID += 2
		switch {
		case t.cfg.Client && t.nextID&1 == 0:
			t.nextID = 1
		case !t.cfg.Client && t.nextID == 0:
			continue
		}
		if _, busy := t.m[t.nextID]; !busy {
			return t.nextID
		}
	}
}

// ours reports whether this end opened the stream with id.
func (t *Streams) ours(id uint32) bool { return proto.StreamOpenedByClient(id) == t.cfg.Client }

// Handle acts on a stream frame from the peer: it accepts or refuses a
// StreamOpen, and moves the others into their streams. What it answers
// (the first StreamCredit of a stream it accepts, the StreamReset of one
// it refuses) it appends to out. An error is a protocol error: the
// connection must end. A frame for a stream no longer open was in flight
// when it finished, and is dropped.
func (t *Streams) Handle(f *proto.Frame, out []byte) ([]byte, error) {
	if f.Kind == proto.KindStreamOpen {
		return t.accept(f, out)
	}
	if f.Kind == proto.KindStreamReset && !t.ours(f.ID) {
		if code, _ := f.ErrorBody(); code == proto.CodeOK {
			return out, protocolError("a StreamReset with code 0 from the stream's opener")
		}
	}
	t.mu.Lock()
	st := t.m[f.ID]
	if st != nil && f.Kind == proto.KindStreamReset {
		t.forgetLocked(st)
	}
	t.mu.Unlock()
	if st == nil {
		return out, nil
	}
	switch f.Kind {
	case proto.KindStreamData:
		return out, st.OnData(f.Payload, f.Flags.Compression(), f.PayloadRoom(t.cfg.Limits.MaxFrameSize))
	case proto.KindStreamCredit:
		if theirs, ok := f.Metadata.Get(proto.MetaCompression); ok && st.AwaitsFirstCredit() {
			t.settle(st, theirs)
		}
		return out, st.OnCredit(f.StreamWindow())
	case proto.KindStreamEnd:
		return out, st.OnEnd()
	case proto.KindStreamReset:
		code, msg := f.ErrorBody()
		st.OnReset(code, msg, f.Flags&proto.FlagUnprocessed != 0)
	}
	return out, nil
}

// accept starts the handler of a stream the peer opens, or refuses it
// with an Unprocessed StreamReset.
func (t *Streams) accept(f *proto.Frame, out []byte) ([]byte, error) {
	if t.ours(f.ID) {
		if t.cfg.Client {
			return out, protocolError("StreamOpen with an odd stream id from the server")
		}
		return out, protocolError("StreamOpen with an even stream id from the client")
	}
	refuse := func(e *handler.Error) ([]byte, error) {
		t.host.Refused(e.Code)
		return proto.AppendStreamReset(out, f.ID, proto.FlagUnprocessed, e.Code, e.Message), nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[f.ID] != nil {
		return out, protocolError("StreamOpen for a stream already open")
	}
	if err := t.host.AcceptErr(); err != nil {
		return refuse(err)
	}
	if t.closed {
		return refuse(errClosed)
	}
	if t.accepted >= t.cfg.MaxAccepted {
		return refuse(errTooManyStreams)
	}
	var rt *handler.StreamRoute
	if t.cfg.Registry != nil {
		rt = t.cfg.Registry.LookupStream(f.Route)
	}
	if rt == nil {
		return refuse(&handler.Error{Code: proto.CodeNotFound, Message: "no stream route " + string(f.Route)})
	}
	call := t.host.NewCall()
	window := t.window()
	st := stream.New(f.ID, false, t.host, call, window, int(f.StreamWindow()))
	st.SetOnFinish(func() { call.Cancel(context.Canceled) })
	var takes []proto.Compression
	if theirs, ok := f.Metadata.Get(proto.MetaCompression); ok && len(t.cfg.Takes) > 0 {
		t.settle(st, theirs)
		takes = t.cfg.Takes
	}
	md := proto.Metadata(append([]byte(nil), f.Metadata...)) // f is a view of the input
	Start(call, rt.Name(), &f.Header, md, transport.WithStream(t.cfg.Base, st), time.Now())
	run := func() {
		err := t.cfg.Runner.Stream(rt, call)
		st.Finish(err)
		call.End()
	}
	if !t.host.Go(run) {
		call.End()
		return refuse(errClosed)
	}
	t.addLocked(st)
	t.accepted++
	return proto.AppendFirstStreamCredit(out, f.ID, uint32(window), takes...), nil
}

// settle has st's data compressed as the peer's list theirs allows
// (docs/protocol.md, "Compression"): in Zip if the peer names it, or, with
// Zip CompressionNone, in the first the peer names of those this end
// does (ParseCompressionList skips the others).
func (t *Streams) settle(st *stream.Stream, theirs []byte) {
	if t.cfg.ZipMin < 0 {
		return
	}
	named := proto.ParseCompressionList(theirs)
	switch {
	case t.cfg.Zip == proto.CompressionNone && len(named) > 0:
		st.SetCompression(named[0], t.cfg.ZipMin)
	case t.cfg.Zip != proto.CompressionNone && slices.Contains(named, t.cfg.Zip):
		st.SetCompression(t.cfg.Zip, t.cfg.ZipMin)
	}
}

// addLocked enters st in the table, with t.mu held.
func (t *Streams) addLocked(st *stream.Stream) {
	if t.m == nil {
		t.m = make(map[uint32]*stream.Stream)
	}
	t.m[st.ID()] = st
	t.open.Add(1)
}

// Forget removes a finished stream from the table (stream.Link's Forget).
func (t *Streams) Forget(st *stream.Stream) {
	t.mu.Lock()
	t.forgetLocked(st)
	t.mu.Unlock()
}

// forgetLocked removes st from the table, with t.mu held.
func (t *Streams) forgetLocked(st *stream.Stream) {
	if t.m[st.ID()] != st {
		return
	}
	delete(t.m, st.ID())
	t.open.Add(-1)
	if t.ours(st.ID()) {
		t.opened--
	} else {
		t.accepted--
	}
}

// Close fails every stream of a connection that is gone, and takes no
// new ones.
func (t *Streams) Close() {
	t.mu.Lock()
	m := t.m
	t.m, t.closed = nil, true
	t.opened, t.accepted = 0, 0
	t.open.Store(0)
	t.mu.Unlock()
	for _, st := range m {
		st.Fail(stream.ErrConnLost)
	}
}

// protocolError is the error of a frame that breaks the protocol: the
// connection ends with a GoAway saying why.
type protocolError string

func (e protocolError) Error() string { return "rpcd: protocol error: " + string(e) }
func (e protocolError) Unwrap() error { return proto.ErrProtocol }
