package handler

import (
	"context"
	"reflect"
	"strings"
	"sync"

	"github.com/rpcd/rpcd/internal/jsoncodec"
	"github.com/rpcd/rpcd/proto"
)

// Func adapts a typed function to a Handler. The request payload is decoded
// into a Req with the call's codec (JSON, or one added by RegisterCodec; an
// empty payload leaves the zero Req) and the Resp returned is encoded with
// the same codec. A payload that
// does not decode is answered with InvalidArgument, marked Unprocessed, and
// fn never runs.
//
//	reg.Handle("Math/Sum", handler.Func(func(ctx context.Context, in Args) (int, error) {
//		return in.A + in.B, nil
//	}))
func Func[Req, Resp any](fn func(ctx context.Context, in Req) (Resp, error)) Handler {
	// Compile sonic's codecs for both types now, not on the first call.
	jsoncodec.Prepare(reflect.TypeFor[Req]())
	jsoncodec.Prepare(reflect.TypeFor[Resp]())
	return &typed[Req, Resp]{fn: fn, states: sync.Pool{New: func() any { return new(typedState[Req, Resp]) }}}
}

type typed[Req, Resp any] struct {
	fn     func(ctx context.Context, in Req) (Resp, error)
	states sync.Pool // of *typedState: the values live there, not on the heap per call
}

// typer is a handler that knows the Go types of its argument and reply:
// Func's. Registry.Handle keeps them for handler/schema, which describes
// the route (a handler of its own around a Func hides them: the route is
// raw).
type typer interface {
	types() (arg, reply reflect.Type)
}

// types returns Req and Resp.
func (h *typed[Req, Resp]) types() (arg, reply reflect.Type) {
	return reflect.TypeFor[Req](), reflect.TypeFor[Resp]()
}

// typedState holds one call's decoded argument and result.
type typedState[Req, Resp any] struct {
	in  Req
	out Resp
}

func (h *typed[Req, Resp]) ServeRPC(ctx context.Context, req []byte, reply []byte) ([]byte, error) {
	codec := JSON
	c := CallFrom(ctx)
	if c != nil {
		if codec = codecFor(c.Codec); codec == nil {
			return reply, &Error{Code: proto.CodeInvalidArgument, Unprocessed: true,
				Message: "route " + c.Route + " takes json, not " + c.Codec.String()}
		}
	}
	st := h.states.Get().(*typedState[Req, Resp])
	defer h.put(st)
	if len(req) > 0 {
		if err := codec.Unmarshal(req, &st.in); err != nil {
			return reply, argumentError(c, err)
		}
	}
	out, err := h.fn(ctx, st.in)
	if err != nil {
		return reply, err
	}
	st.out = out
	start := len(reply)
	reply, err = codec.Append(reply, &st.out)
	if err != nil {
		return reply[:start], Errorf(proto.CodeInternal, "encoding reply: %v", err)
	}
	return reply, nil
}

// argumentError is the InvalidArgument error of a call whose argument did
// not decode: "Math/Sum: argument: field "a": want a number, got a string
// at byte 6" (the codec's words after "argument: ").
func argumentError(c *Call, err error) error {
	msg := "argument: " + strings.TrimPrefix(err.Error(), "rpcd: ")
	if c != nil && c.Route != "" {
		msg = c.Route + ": " + msg
	}
	return &Error{Code: proto.CodeInvalidArgument, Unprocessed: true, Message: msg}
}

// put clears a state, so the pool holds no reference from a finished call,
// and returns it to the pool.
func (h *typed[Req, Resp]) put(st *typedState[Req, Resp]) {
	*st = typedState[Req, Resp]{}
	h.states.Put(st)
}
