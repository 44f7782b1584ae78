package transport

import (
	"context"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/handlerstate"
	"github.com/rpcd/rpcd/proto"
)

// What a caller does before and after a call, on either side of a
// connection (client.Client, a server's reactor.Peer): refuse to wait
// from an inline handler, encode the argument, decode the reply.

// RefuseWait returns nil if ctx may wait for a reply from the network, as
// any context may that is not an inline handler's. Under the Call of a
// handler running inline on an event loop (Call.Inline), or a context
// derived from it, it returns a FailedPrecondition *handler.Error, marked
// Unprocessed, saying that doing to target (as "calling", "Math/Sum")
// would stall the loop and how to avoid it: the reply could only be read
// by the loop the handler holds, or by no loop that could run meanwhile.
// A client's and a server's calls that wait check it before anything
// else; it allocates nothing unless it refuses.
func RefuseWait(ctx context.Context, doing, target string) error {
	c := handler.CallFrom(ctx)
	if c == nil || !c.Inline {
		return nil
	}
	return &handler.Error{Code: proto.CodeFailedPrecondition, Unprocessed: true,
		Message: doing + " " + target + " from the inline handler of " + c.Route + " would stall its event loop: " +
			"register " + c.Route + " with handler.Blocking() to run it on the goroutine pool"}
}

// AppendArg appends in, a call's argument, to dst encoded as JSON: it is
// AppendArgWith(handler.JSON, dst, in).
func AppendArg(dst []byte, in any) ([]byte, error) { return AppendArgWith(handler.JSON, dst, in) }

// AppendArgWith appends in, a call's argument, to dst encoded with c; a
// nil in is no payload. A value c cannot encode is an InvalidArgument
// error marked Unprocessed: the call was never sent. Callers on either
// side of a connection (client.Client, a server's Peer) encode arguments
// with it.
func AppendArgWith(c handler.Codec, dst []byte, in any) ([]byte, error) {
	if in == nil {
		return dst, nil
	}
	out, err := c.Append(dst, in)
	if err != nil {
		return dst, &handler.Error{Code: proto.CodeInvalidArgument, Message: "encoding the argument: " + err.Error(), Unprocessed: true}
	}
	return out, nil
}

// DecodeReply decodes the JSON reply of a call to route into out: it is
// DecodeReplyWith(handler.JSON, route, reply, out).
func DecodeReply(route string, reply []byte, out any) error {
	return DecodeReplyWith(handler.JSON, route, reply, out)
}

// DecodeReplyWith decodes the reply of a call to route, encoded with c,
// into out, a pointer; a nil out or an empty reply decodes nothing.
func DecodeReplyWith(c handler.Codec, route string, reply []byte, out any) error {
	if out == nil || len(reply) == 0 {
		return nil
	}
	if err := c.Unmarshal(reply, out); err != nil {
		return &handler.Error{Code: proto.CodeInvalidArgument, Message: "decoding the reply of " + route + ": " + err.Error()}
	}
	return nil
}

// WithStream returns a context carrying s, for the transport to start a
// stream handler's Call with (Call.Start(WithStream(base, s), deadline)):
// StreamRoute.ServeStream finds the stream there, under any middleware,
// and so does handler.StreamFrom.
func WithStream(parent context.Context, s handler.Stream) context.Context {
	return context.WithValue(parent, handlerstate.StreamKey{}, s)
}

// CancelWhen makes the end of ctx cancel c (with context.Canceled) until
// c.End, for a transport whose calls end with something a context says,
// as the gateway's end with their HTTP request (the client went away).
// Call it after c.Start. Nothing is armed until the handler can see the
// cancel: c.Err looks at ctx, and c.Done (or a context derived from c)
// arms a context.AfterFunc on it, which End stops; a handler that never
// asks costs the call nothing.
func CancelWhen(c *handler.Call, ctx context.Context) { cancelWhen(c, ctx) }

var cancelWhen = handlerstate.CancelWhen.(func(*handler.Call, context.Context))
