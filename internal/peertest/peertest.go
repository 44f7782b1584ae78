// Package peertest serves the routes through which the tests of clients
// written in other languages (internal/interop, clients/python, clients/ts)
// have the server call the client back: PREFIX/CallMeBack, a Request from
// the server answered by the client's handler, and PREFIX/Push, one-way
// messages. The prefix is the one each test's script calls.
package peertest

import (
	"context"
	"encoding/json"
	"time"

	"github.com/rpcd/rpcd/handler"
)

// CallMeBack is what PREFIX/CallMeBack takes: the server calls Route on
// the calling client with Payload, labelled Raw (Peer.CallRaw), or JSON
// when JSON is set (Peer.Call; Payload is then one JSON value). DeadlineMS,
// when set, bounds that call; CancelAfterMS, when set, cancels it that many
// milliseconds after it was sent. In JSON, Payload is base64.
type CallMeBack struct {
	Route         string `json:"route"`
	Payload       []byte `json:"payload"`
	JSON          bool   `json:"json"`
	DeadlineMS    int    `json:"deadline_ms"`
	CancelAfterMS int    `json:"cancel_after_ms"`
}

// CalledBack is what PREFIX/CallMeBack answers: the client's reply, or the
// error the server's call got (Code 0 when the client answered).
type CalledBack struct {
	Reply       []byte `json:"reply"`
	Code        int    `json:"code"`
	Message     string `json:"message"`
	Unprocessed bool   `json:"unprocessed"`
}

// Failed is the CalledBack of a call that failed with err.
func Failed(err error) CalledBack {
	return CalledBack{Code: int(handler.CodeOf(err)), Message: handler.MessageOf(err), Unprocessed: handler.IsUnprocessed(err)}
}

// Push is what PREFIX/Push takes: one one-way message to Route on the
// calling client per payload, in order; Raw (Peer.NotifyRaw), or JSON when
// JSON is set (Peer.Notify; each payload one JSON value). It answers how
// many it sent.
type Push struct {
	Route    string   `json:"route"`
	Payloads [][]byte `json:"payloads"`
	JSON     bool     `json:"json"`
}

// Register adds prefix/CallMeBack (Blocking, as a handler that waits for
// its peer must be) and prefix/Push to reg.
func Register(reg *handler.Registry, prefix string) {
	reg.Handle(prefix+"/CallMeBack", handler.Func(func(ctx context.Context, in CallMeBack) (CalledBack, error) {
		peer := handler.CallFrom(ctx).Peer
		if in.DeadlineMS > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(in.DeadlineMS)*time.Millisecond)
			defer cancel()
		}
		if in.CancelAfterMS > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			t := time.AfterFunc(time.Duration(in.CancelAfterMS)*time.Millisecond, cancel)
			defer t.Stop()
		}
		var out CalledBack
		var err error
		if in.JSON {
			var reply json.RawMessage
			err = peer.Call(ctx, in.Route, json.RawMessage(in.Payload), &reply)
			out.Reply = reply
		} else {
			out.Reply, err = peer.CallRaw(ctx, in.Route, in.Payload, nil)
		}
		if err != nil {
			return Failed(err), nil
		}
		return out, nil
	}), handler.Blocking())
	reg.Handle(prefix+"/Push", handler.Func(func(ctx context.Context, in Push) (int, error) {
		peer := handler.CallFrom(ctx).Peer
		for i, p := range in.Payloads {
			var err error
			if in.JSON {
				err = peer.Notify(ctx, in.Route, json.RawMessage(p))
			} else {
				err = peer.NotifyRaw(ctx, in.Route, p)
			}
			if err != nil {
				return i, err
			}
		}
		return len(in.Payloads), nil
	}))
}
