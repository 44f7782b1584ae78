package handler

import (
	"context"
	"reflect"

	"github.com/bytedance/sonic"

	"github.com/rpcd/rpcd/proto"
)

// Func adapts a typed function to a Handler. The request payload is decoded
// into a Req with the call's codec (JSON; an empty payload leaves the zero
// Req) and the Resp returned is encoded with the same codec. A payload that
// does not decode is answered with InvalidArgument, marked Unprocessed, and
// fn never runs.
//
//	reg.Handle("Math/Sum", handler.Func(func(ctx context.Context, in Args) (int, error) {
//		return in.A + in.B, nil
//	}))
func Func[Req, Resp any](fn func(ctx context.Context, in Req) (Resp, error)) Handler {
	// Compile sonic's codecs for both types now, not on the first call.
	_ = sonic.Pretouch(reflect.TypeFor[Req]())
	_ = sonic.Pretouch(reflect.TypeFor[Resp]())
	return typed[Req, Resp](fn)
}

type typed[Req, Resp any] func(ctx context.Context, in Req) (Resp, error)

func (fn typed[Req, Resp]) ServeRPC(ctx context.Context, req []byte, reply []byte) ([]byte, error) {
	codec := JSON
	if c := CallFrom(ctx); c != nil {
		if codec = codecFor(c.Codec); codec == nil {
			return reply, &Error{Code: proto.CodeInvalidArgument, Unprocessed: true,
				Message: "route " + c.Route + " takes json, not " + c.Codec.String()}
		}
	}
	var in Req
	if len(req) > 0 {
		if err := codec.Unmarshal(req, &in); err != nil {
			return reply, &Error{Code: proto.CodeInvalidArgument, Unprocessed: true,
				Message: "decoding arguments: " + err.Error()}
		}
	}
	out, err := fn(ctx, in)
	if err != nil {
		return reply, err
	}
	start := len(reply)
	reply, err = codec.Append(reply, &out)
	if err != nil {
		return reply[:start], Errorf(ErrInternal.Code, "encoding reply: %v", err)
	}
	return reply, nil
}
