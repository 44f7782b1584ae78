package engine

import (
	"context"
	"errors"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/proto"
)

// Deadline is the deadline a frame's Deadline field, ms milliseconds,
// gives a call or stream that arrived at now; zero for none (ms 0).
func Deadline(now time.Time, ms uint32) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return now.Add(time.Duration(ms) * time.Millisecond)
}

// Copy copies the sections of f a handler reads, its metadata and
// payload, into dst, reusing dst's room, for a handler that runs off the
// reader (whose frames are views of an input buffer reused at once). It
// returns the buffer and views of both sections in it; md's capacity ends
// at its length, so that appending to it cannot overwrite the payload.
func Copy(dst []byte, f *proto.Frame) (buf []byte, md proto.Metadata, payload []byte) {
	buf = append(append(dst[:0], f.Metadata...), f.Payload...)
	n := len(f.Metadata)
	return buf, proto.Metadata(buf[:n:n]), buf[n:]
}

// Start readies call, whose connection's fields (Remote, Identity, Peer)
// the side has set, for the call f starts on route, which arrived at now:
// its route, id, codec and metadata md (a view of f's, or of a copy), and
// its deadline from f's Deadline field. base supplies the values a
// handler's context carries.
func Start(call *handler.Call, route string, f *proto.Header, md proto.Metadata, base context.Context, now time.Time) {
	call.Route, call.ID, call.Codec, call.Metadata = route, f.ID, f.Codec, md
	call.Start(base, Deadline(now, f.Deadline))
}

// Running is the calls from the peer that this end runs off its reader
// (the server's Blocking calls, every call the server makes to a client),
// by call id, so that a Cancel finds its call and a lost connection
// cancels them all. It has no lock of its own: its methods are called with
// a lock of the side's held, the one that guards what changes with it (the
// server's outbox, which a call's reply joins as the call leaves Running,
// so that no one sees the call gone and its reply not yet queued). The
// zero value is ready; once closed, it takes no call.
type Running struct {
	calls  map[uint32]*handler.Call
	closed bool
}

// Refusals of a call Running takes no more of.
var (
	errTooMany   = &handler.Error{Code: proto.CodeResourceExhausted, Message: "too many calls in flight on this connection", Unprocessed: true}
	errDuplicate = &handler.Error{Code: proto.CodeInvalidArgument, Message: "call id already in flight", Unprocessed: true}
	errClosed    = &handler.Error{Code: proto.CodeUnavailable, Message: "the connection is closed", Unprocessed: true}
)

// Add enters call, the call with id, unless max calls run already, one
// with id does, or r is closed: then it returns the refusal to answer
// with (Unprocessed).
func (r *Running) Add(id uint32, call *handler.Call, max int) *handler.Error {
	switch {
	case r.closed:
		return errClosed
	case len(r.calls) >= max:
		return errTooMany
	case r.calls[id] != nil:
		return errDuplicate
	}
	if r.calls == nil {
		r.calls = make(map[uint32]*handler.Call)
	}
	r.calls[id] = call
	return nil
}

// Remove takes the call with id out, before its Call is ended or reused.
func (r *Running) Remove(id uint32) { delete(r.calls, id) }

// Cancel cancels the call with id, if it runs: the peer sent a Cancel.
// The side's lock, held, keeps the call from ending and being reused for
// another between the look-up and the cancel.
func (r *Running) Cancel(id uint32) {
	if call := r.calls[id]; call != nil {
		call.Cancel(context.Canceled)
	}
}

// Close cancels every call running, whose connection is gone, and takes
// no more.
func (r *Running) Close() {
	r.closed = true
	for _, call := range r.calls {
		call.Cancel(context.Canceled)
	}
}

// Len returns the number of calls running.
func (r *Running) Len() int { return len(r.calls) }

// ExpandRequest appends the compressed payload z of a call, compressed
// with zip, expanded within room (its frame's room under the frame limit,
// proto.Header.PayloadRoom), to dst. A payload that does not expand
// refuses the call, unprocessed: ResourceExhausted past the limit, else
// InvalidArgument, as arguments that do not decode.
func ExpandRequest(dst, z []byte, zip proto.Compression, room int) ([]byte, *handler.Error) {
	out, err := compression.Expand(dst, z, zip, room)
	if err == nil {
		return out, nil
	}
	code := proto.CodeInvalidArgument
	if errors.Is(err, compression.ErrTooLarge) {
		code = proto.CodeResourceExhausted
	}
	return out, &handler.Error{Code: code, Message: err.Error(), Unprocessed: true}
}
