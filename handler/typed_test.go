package handler

import (
	"context"
	"testing"
)

func TestTypedAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	h := Func(func(_ context.Context, s string) (string, error) { return s, nil })
	c := &Call{Codec: 1}
	req := []byte(`"0123456789abcdef"`)
	buf := make([]byte, 0, 64)
	allocs := testing.AllocsPerRun(1000, func() {
		var err error
		if buf, err = h.ServeRPC(c, req, buf[:0]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Fatalf("a typed string echo allocates %.1f times, want at most 1 (the decoded string)", allocs)
	}
}
