package transport

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

type ctxKey string

// TestRefuseWait: only an inline handler's context is refused, with a
// message that names the route and the remedy; it allocates nothing
// otherwise.
func TestRefuseWait(t *testing.T) {
	inline := &handler.Call{Route: "A/Inline", Inline: true}
	pooled := &handler.Call{Route: "A/Pooled"}
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		refused bool
	}{
		{"Background", context.Background(), false},
		{"a pooled call", pooled, false},
		{"an inline call", inline, true},
		{"derived from an inline call", context.WithoutCancel(context.WithValue(inline, ctxKey("k"), 1)), true},
	} {
		err := RefuseWait(tc.ctx, "calling", "B/Other")
		if !tc.refused {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		var e *handler.Error
		const want = "calling B/Other from the inline handler of A/Inline would stall its event loop: register A/Inline with handler.Blocking() to run it on the goroutine pool"
		if !errors.As(err, &e) || e.Code != proto.CodeFailedPrecondition || !e.Unprocessed || e.Message != want {
			t.Errorf("%s: %#v", tc.name, err)
		}
	}
	if raceEnabled {
		return
	}
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() { _ = RefuseWait(ctx, "calling", "B/Other") }); n != 0 {
		t.Errorf("RefuseWait(Background) allocates %v times", n)
	}
}

// TestCancelWhen: the end of the watched context cancels the call for a
// handler that asks, whether through Err, Done or a context derived from
// the call; a Call whose handler never asked stays reusable, and watching
// it allocates nothing.
func TestCancelWhen(t *testing.T) {
	const limit = 10 * time.Second
	start := func(watch context.Context) *handler.Call {
		c := &handler.Call{Route: "A/B"}
		c.Start(context.Background(), time.Time{})
		CancelWhen(c, watch)
		return c
	}

	t.Run("Err", func(t *testing.T) {
		watch, cancel := context.WithCancel(context.Background())
		c := start(watch)
		if err := c.Err(); err != nil {
			t.Fatalf("Err before the watched context ended: %v", err)
		}
		cancel()
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err after the watched context ended: %v, want context.Canceled", err)
		}
		if !c.End() {
			t.Fatal("End: a Call whose Done was never asked for is reusable")
		}
		c.Start(context.Background(), time.Time{}) // the next call, unwatched
		if err := c.Err(); err != nil {
			t.Fatalf("Err of the next call: %v", err)
		}
	})

	t.Run("Done", func(t *testing.T) {
		watch, cancel := context.WithCancel(context.Background())
		c := start(watch)
		done := c.Done()
		select {
		case <-done:
			t.Fatal("Done closed before the watched context ended")
		default:
		}
		cancel()
		select {
		case <-done:
		case <-time.After(limit):
			t.Fatal("Done did not close after the watched context ended")
		}
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err: %v, want context.Canceled", err)
		}
		if c.End() {
			t.Fatal("End: a Call whose Done was handed out is not reusable")
		}
	})

	t.Run("derived", func(t *testing.T) {
		watch, cancel := context.WithCancel(context.Background())
		c := start(watch)
		derived, stop := context.WithCancel(context.WithValue(c, ctxKey("k"), 1))
		defer stop()
		cancel()
		select {
		case <-derived.Done():
		case <-time.After(limit):
			t.Fatal("a context derived from the call did not end with the watched context")
		}
		c.End()
	})

	t.Run("ended already", func(t *testing.T) {
		watch, cancel := context.WithCancel(context.Background())
		cancel()
		c := start(watch)
		select {
		case <-c.Done():
		default:
			t.Fatal("Done is open though the watched context had ended")
		}
		c.End()
	})

	t.Run("End stops the watch", func(t *testing.T) {
		watch, cancel := context.WithCancel(context.Background())
		defer cancel()
		c := start(watch)
		done := c.Done()
		c.End()
		select {
		case <-done:
		default:
			t.Fatal("Done is open after End")
		}
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err after End: %v", err)
		}
	})

	t.Run("allocs", func(t *testing.T) {
		if raceEnabled {
			t.Skip("allocations differ under the race detector")
		}
		watch, cancel := context.WithCancel(context.Background())
		defer cancel()
		c := &handler.Call{Route: "A/B"}
		allocs := testing.AllocsPerRun(100, func() {
			c.Start(context.Background(), time.Time{})
			CancelWhen(c, watch)
			_ = c.Err()
			if !c.End() {
				t.Fatal("End: not reusable")
			}
		})
		if allocs != 0 {
			t.Fatalf("%.1f allocations a watched call whose handler never asked for Done, want 0", allocs)
		}
	})
}
