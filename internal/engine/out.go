package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unsafe"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/proto"
)

// Header checks a call this end makes against lim and builds its frame
// header and metadata: the metadata of ctx (handler.WithMetadata), with
// the trace context and baggage ctx carries or passes on (Metadata), and
// the Deadline field from ctx's deadline. A call it refuses is never sent:
// its error is Unprocessed.
func Header(ctx context.Context, kind proto.Kind, codec proto.Codec, route string, payload []byte, lim *proto.Limits) (proto.Header, proto.Metadata, error) {
	h := proto.Header{Kind: kind, Codec: codec}
	if err := CheckRoute(route, lim); err != nil {
		return h, nil, err
	}
	if ctx == context.Background() { // no values and no deadline: nothing to look up
		return h, nil, CheckSize(route, nil, payload, lim)
	}
	md := Metadata(ctx)
	if len(md) > lim.MaxMetadata {
		return h, nil, &handler.Error{Code: proto.CodeResourceExhausted, Message: "metadata exceeds the limit", Unprocessed: true}
	}
	if err := CheckSize(route, md, payload, lim); err != nil {
		return h, nil, err
	}
	var ok bool
	if h.Deadline, ok = DeadlineField(ctx); !ok {
		return h, nil, &handler.Error{Code: proto.CodeDeadlineExceeded, Message: "deadline passed before " + route + " was sent", Unprocessed: true}
	}
	return h, md, nil
}

// A RouteCheck checks the calls of a caller that calls one route over and
// over (an AsyncCaller, a Pipe): the route once, then each call's size by
// one comparison (Fits). Its zero value has checked nothing.
type RouteCheck struct {
	route string
	room  int // one more than the largest payload of route a frame holds; 0 before the first check
}

// Fits reports whether a call of route with payload and no metadata can
// be sent as far as the check knows without a look at the limits: route
// is the one it last passed, and payload fits its frame. A call that does
// not fit is Check's to say.
func (r *RouteCheck) Fits(route string, payload []byte) bool {
	// The same string, as a caller's route constant is, without a call to
	// compare its bytes (which spilled a caller's registers on every call).
	return len(payload) < r.room && len(route) == len(r.route) &&
		(unsafe.StringData(route) == unsafe.StringData(r.route) || route == r.route)
}

// Check returns the error of a call of route with payload and no metadata
// that cannot be sent under lim (CheckRoute, CheckSize); nil if it can.
func (r *RouteCheck) Check(route string, payload []byte, lim *proto.Limits) error {
	if r.Fits(route, payload) {
		return nil
	}
	return r.check(route, payload, lim)
}

func (r *RouteCheck) check(route string, payload []byte, lim *proto.Limits) error {
	if route != r.route || r.room == 0 {
		if err := CheckRoute(route, lim); err != nil {
			return err
		}
		r.route, r.room = route, lim.MaxFrameSize-proto.HeaderSize-len(route)+1
	}
	return CheckSize(route, nil, payload, lim)
}

// CheckRoute returns the error of a call to route, which is not a route
// or is longer than lim allows; nil if it may be called.
func CheckRoute(route string, lim *proto.Limits) error {
	if err := handler.ValidRoute(route); err != nil || len(route) > lim.MaxRoute {
		return &handler.Error{Code: proto.CodeInvalidArgument, Message: "bad route " + route, Unprocessed: true}
	}
	return nil
}

// CheckSize returns the error of a request of route, md and payload too
// large for a frame under lim; nil if it fits.
func CheckSize(route string, md proto.Metadata, payload []byte, lim *proto.Limits) error {
	if n := proto.HeaderSize + len(route) + len(md) + len(payload); n > lim.MaxFrameSize {
		return frameTooLarge(n, lim.MaxFrameSize)
	}
	return nil
}

// frameTooLarge is the error of a call whose request of n bytes passes the
// frame limit limit.
func frameTooLarge(n, limit int) error {
	return &handler.Error{Code: proto.CodeResourceExhausted, Unprocessed: true,
		Message: fmt.Sprintf("request of %d bytes exceeds the frame limit of %d", n, limit)}
}

// DeadlineField returns the milliseconds left before ctx's deadline,
// rounded up, for a frame's Deadline field: 0 when ctx has none, and false
// when it has passed.
func DeadlineField(ctx context.Context) (uint32, bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, true
	}
	left := time.Until(dl)
	if left <= 0 {
		return 0, false
	}
	ms := (left + time.Millisecond - 1) / time.Millisecond
	return uint32(min(int64(ms), math.MaxUint32)), true
}

// ContextError is the error of a call to route whose caller's context
// ended (err is ctx.Err()) before its answer came: DeadlineExceeded or
// Canceled. The call may have run.
func ContextError(err error, route string) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return &handler.Error{Code: proto.CodeDeadlineExceeded, Message: "call " + route + ": deadline exceeded"}
	}
	return &handler.Error{Code: proto.CodeCanceled, Message: "call " + route + ": canceled"}
}

// Answer is the outcome of a call that the Response or Error frame f
// answers: a Response's payload appended to reply (expanded, if it came
// compressed, within maxFrame), or an Error's code and message as a
// *handler.Error, Unprocessed if f says so. f is a view of the input:
// nothing of it is kept. A Response that does not expand is DataLoss: the
// call ran, and what it answered is lost.
func Answer(f *proto.Frame, reply []byte, maxFrame int) ([]byte, error) {
	if f.Kind != proto.KindResponse {
		code, msg := f.ErrorBody()
		return reply, &handler.Error{Code: code, Message: string(msg), Unprocessed: f.Flags&proto.FlagUnprocessed != 0}
	}
	if z := f.Flags.Compression(); z != proto.CompressionNone {
		return Expand(reply, f.Payload, &f.Header, maxFrame)
	}
	return append(reply, f.Payload...), nil
}

// Expand appends the compressed payload z of the Response whose header is
// h, expanded within maxFrame, to reply, as Answer does: for a reader
// that takes a large reply's payload apart from its frame.
func Expand(reply, z []byte, h *proto.Header, maxFrame int) ([]byte, error) {
	reply, err := compression.Expand(reply, z, h.Flags.Compression(), h.PayloadRoom(maxFrame))
	if err != nil {
		return reply, &handler.Error{Code: proto.CodeDataLoss, Message: "the peer's reply: " + strings.TrimPrefix(err.Error(), "rpcd: ")}
	}
	return reply, nil
}
