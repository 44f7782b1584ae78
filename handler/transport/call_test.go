package transport

import (
	"context"
	"errors"
	"testing"

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
