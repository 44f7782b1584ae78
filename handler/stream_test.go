package handler_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/proto"
)

// TestHandleStream: stream routes live beside call routes, are listed
// with them, take the registry's middleware, and turn a panic into a
// PanicError; a stream route serves no call.
func TestHandleStream(t *testing.T) {
	r := handler.NewRegistry()
	r.HandleFunc("A/Call", func(_ context.Context, req, reply []byte) ([]byte, error) { return reply, nil })
	ran := 0
	r.HandleStream("B/Stream", func(ctx context.Context, s handler.Stream) error {
		ran++
		if handler.StreamFrom(ctx) != s {
			t.Error("the handler's context does not carry its stream")
		}
		return nil
	})
	r.HandleStream("C/Panic", func(context.Context, handler.Stream) error { panic("boom") })
	if r.Lookup([]byte("B/Stream")) != nil || r.LookupStream([]byte("A/Call")) != nil {
		t.Fatal("stream and call routes are not apart")
	}
	got := r.Routes()
	if len(got) != 3 || got[0] != (handler.RouteInfo{Name: "A/Call"}) || got[1] != (handler.RouteInfo{Name: "B/Stream", Stream: true}) {
		t.Fatalf("Routes() = %+v", got)
	}
	var seen []string
	r.Use(func(next handler.Handler) handler.Handler {
		return handler.HandlerFunc(func(ctx context.Context, req, reply []byte) ([]byte, error) {
			seen = append(seen, handler.CallFrom(ctx).Route)
			if handler.CallFrom(ctx).Route == "C/Panic" {
				return reply, &handler.Error{Code: proto.CodePermissionDenied, Unprocessed: true}
			}
			return next.ServeRPC(ctx, req, reply)
		})
	})
	var s handler.Stream = (*nopStream)(nil)
	call := &handler.Call{Route: "B/Stream"}
	call.Start(transport.WithStream(context.Background(), s), noDeadline)
	if err := r.LookupStream([]byte("B/Stream")).ServeStream(call); err != nil || ran != 1 {
		t.Fatalf("ServeStream: %v, ran %d", err, ran)
	}
	call = &handler.Call{Route: "C/Panic"}
	call.Start(transport.WithStream(context.Background(), s), noDeadline)
	if err := r.LookupStream([]byte("C/Panic")).ServeStream(call); !errors.Is(err, handler.ErrPermissionDenied) {
		t.Fatalf("the middleware's refusal: %v", err)
	}
	if len(seen) != 2 {
		t.Fatalf("the middleware saw %v", seen)
	}
	r2 := handler.NewRegistry()
	r2.HandleStream("C/Panic", func(context.Context, handler.Stream) error { panic("boom") })
	call = &handler.Call{Route: "C/Panic"}
	call.Start(transport.WithStream(context.Background(), s), noDeadline)
	var pe *handler.PanicError
	if err := r2.LookupStream([]byte("C/Panic")).ServeStream(call); !errors.As(err, &pe) {
		t.Fatalf("a panic: %v, want a PanicError", err)
	}
	// Without a stream in its context (a transport's mistake), a stream
	// route refuses to run.
	call = &handler.Call{Route: "B/Stream"}
	call.Start(context.Background(), noDeadline)
	if err := r.LookupStream([]byte("B/Stream")).ServeStream(call); handler.CodeOf(err) != proto.CodeUnimplemented {
		t.Fatalf("no stream: %v", err)
	}
	for _, bad := range []string{"", "B/Stream"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("HandleStream(%q) did not panic", bad)
				}
			}()
			r.HandleStream(bad, func(context.Context, handler.Stream) error { return nil })
		}()
	}
}

var noDeadline time.Time // none

type nopStream struct{}

func (*nopStream) Context() context.Context    { return context.Background() }
func (*nopStream) Read([]byte) (int, error)    { return 0, nil }
func (*nopStream) Write(p []byte) (int, error) { return len(p), nil }
func (*nopStream) CloseSend() error            { return nil }
func (*nopStream) Close() error                { return nil }
