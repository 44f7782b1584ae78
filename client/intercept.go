package client

import (
	"context"

	"github.com/rpcd/rpcd/proto"
)

// Interceptor wraps the calls a Client or a Cluster sends, as middleware
// wraps a server's handlers: Call, CallRaw, Notify and NotifyRaw, and the
// futures Go and GoRaw. It runs on the caller's goroutine (a future's on a
// goroutine of its own), before the call is sent and after its reply or
// failure, retries included, and sends it by calling next, which it may
// give another context (metadata, a trace) or not call at all (a cache, a
// refusal). info says what the call is; req is its payload, encoded, and
// reply the buffer its reply is appended to; it returns the reply. req and
// reply are the caller's: an interceptor keeps neither past its return.
//
// A Client with interceptors costs a call a few allocations (its info, and
// a closure per interceptor); one without, nothing.
type Interceptor func(ctx context.Context, info *CallInfo, req, reply []byte, next Invoker) ([]byte, error)

// Invoker sends the call an Interceptor was given, or hands it to the next
// interceptor.
type Invoker func(ctx context.Context, req, reply []byte) ([]byte, error)

// CallInfo is what an Interceptor is told of a call.
type CallInfo struct {
	Route  string
	Codec  proto.Codec // the payload's: raw, JSON or Options.Codec's
	OneWay bool        // Notify's: no reply comes back
}

// chain returns the interceptors as one, the first outermost; nil for
// none.
func chain(ics []Interceptor) Interceptor {
	switch len(ics) {
	case 0:
		return nil
	case 1:
		return ics[0]
	}
	return func(ctx context.Context, info *CallInfo, req, reply []byte, next Invoker) ([]byte, error) {
		for i := len(ics) - 1; i > 0; i-- {
			ic, inner := ics[i], next
			next = func(ctx context.Context, req, reply []byte) ([]byte, error) {
				return ic(ctx, info, req, reply, inner)
			}
		}
		return ics[0](ctx, info, req, reply, next)
	}
}

// sendVia sends a request through s, under its interceptors if it has
// any, and returns the reply appended to reply.
func sendVia(ctx context.Context, s sender, codec proto.Codec, route string, req, reply []byte) ([]byte, error) {
	send := func(ctx context.Context, req, reply []byte) ([]byte, error) {
		cl := getCall()
		defer putCall(cl)
		cl.reply = reply
		if err := s.do(ctx, codec, route, req, cl); err != nil {
			return reply, err
		}
		return cl.reply, nil
	}
	return s.interceptor()(ctx, &CallInfo{Route: route, Codec: codec}, req, reply, send)
}

// notifyVia sends a one-way call through s's interceptors.
func notifyVia(ctx context.Context, s sender, codec proto.Codec, route string, req []byte) error {
	send := func(ctx context.Context, req, reply []byte) ([]byte, error) {
		return reply, s.notify(ctx, codec, route, req)
	}
	_, err := s.interceptor()(ctx, &CallInfo{Route: route, Codec: codec, OneWay: true}, req, nil, send)
	return err
}

// goVia runs a future's call through s's interceptors, on a goroutine of
// its own, and completes f.
func goVia(ctx context.Context, s sender, codec proto.Codec, route string, req []byte, f *Future) {
	go func() {
		reply, err := sendVia(ctx, s, codec, route, req, nil)
		if err == nil {
			f.reply = reply
		}
		f.complete(err)
	}()
}
