package reactor_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// TestPassedOnUnprocessedRunsOnce: a handler that acts, then calls on and
// returns its callee's error unchanged, has run: the error, which its
// callee marked Unprocessed (a backend refusing the call, a client's
// handler saying it did nothing, a backend that is gone), answers the
// handler's own call without the flag, so the caller, which would send an
// Unprocessed Unavailable or ResourceExhausted again, sends it once.
func TestPassedOnUnprocessedRunsOnce(t *testing.T) {
	refuse := func(code proto.Code) func(context.Context, []byte, []byte) ([]byte, error) {
		return func(context.Context, []byte, []byte) ([]byte, error) {
			return nil, &handler.Error{Code: code, Message: "refused before acting", Unprocessed: true}
		}
	}
	backReg := handler.NewRegistry()
	backReg.HandleFunc("Back/Full", refuse(proto.CodeResourceExhausted))
	back := start(t, backReg, reactor.Options{})
	backend := dial(t, back, client.Options{})

	gone := start(t, builtinRegistry(), reactor.Options{})
	toGone := dial(t, gone, client.Options{})
	if err := gone.Shutdown(ctxT(t)); err != nil {
		t.Fatal(err)
	}

	var ran atomic.Int64
	reg := builtinRegistry()
	act := func(call func(ctx context.Context) error) handler.Handler {
		return handler.HandlerFunc(func(ctx context.Context, _, reply []byte) ([]byte, error) {
			ran.Add(1) // the side effect
			return reply, call(ctx)
		})
	}
	reg.Handle("Front/ViaClient", act(func(ctx context.Context) error {
		_, err := backend.CallRaw(ctx, "Back/Full", nil, nil)
		return err
	}), handler.Blocking())
	reg.Handle("Front/ViaFuture", act(func(ctx context.Context) error {
		return backend.GoRaw(ctx, "Back/Full", nil).Wait()
	}), handler.Blocking())
	reg.Handle("Front/ViaClosed", act(func(ctx context.Context) error {
		_, err := toGone.CallRaw(ctx, builtin.EchoPacket, nil, nil)
		return err
	}), handler.Blocking())
	reg.Handle("Front/ViaPeer", act(func(ctx context.Context) error {
		_, err := handler.CallFrom(ctx).Peer.CallRaw(ctx, "Client/Busy", nil, nil)
		return err
	}), handler.Blocking())
	reg.Handle("Front/Wrapped", act(func(ctx context.Context) error {
		_, err := backend.CallRaw(ctx, "Back/Full", nil, nil)
		return errors.Join(errors.New("placing the order"), err)
	}), handler.Blocking())
	reg.HandleFunc("Front/Own", func(context.Context, []byte, []byte) ([]byte, error) {
		ran.Add(1)
		return nil, &handler.Error{Code: proto.CodeUnavailable, Message: "did nothing", Unprocessed: true}
	})
	front := start(t, reg, reactor.Options{})
	clientReg := handler.NewRegistry()
	clientReg.HandleFunc("Client/Busy", refuse(proto.CodeUnavailable))
	c := dial(t, front, client.Options{MaxRetries: 3, Handler: clientReg})

	for _, route := range []string{"Front/ViaClient", "Front/ViaFuture", "Front/ViaClosed", "Front/ViaPeer", "Front/Wrapped"} {
		ran.Store(0)
		_, err := c.CallRaw(ctxT(t), route, nil, nil)
		code := handler.CodeOf(err)
		if code != proto.CodeResourceExhausted && code != proto.CodeUnavailable {
			t.Fatalf("%s: %v, want the callee's ResourceExhausted or Unavailable", route, err)
		}
		if handler.IsUnprocessed(err) || ran.Load() != 1 {
			t.Errorf("%s: %v, unprocessed %v, ran %d times; want it run once and answered without the flag",
				route, err, handler.IsUnprocessed(err), ran.Load())
		}
	}
	// The handler's own Unprocessed error still says so: sent 1 + 3 times.
	ran.Store(0)
	if _, err := c.CallRaw(ctxT(t), "Front/Own", nil, nil); !handler.IsUnprocessed(err) || ran.Load() != 4 {
		t.Errorf("Front/Own: %v, ran %d times; want Unprocessed, sent again 3 times", err, ran.Load())
	}
	// The caller of a refused call still sees the flag.
	if _, err := backend.CallRaw(ctxT(t), "Back/Full", nil, nil); !handler.IsUnprocessed(err) || !errors.Is(err, handler.ErrResourceExhausted) {
		t.Errorf("Back/Full called directly: %v, want ResourceExhausted, Unprocessed", err)
	}
	c.Close()
	if _, err := c.CallRaw(ctxT(t), "Front/Own", nil, nil); !errors.Is(err, client.ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}
