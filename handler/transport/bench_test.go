package transport

import (
	"context"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// BenchmarkRefuseWait measures the check every client call that waits
// makes first: for a caller's own context, what a call pays when it is
// not refused.
//
//	go test -run '^$' -bench RefuseWait ./handler/transport
func BenchmarkRefuseWait(b *testing.B) {
	timeout, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for _, bc := range []struct {
		name string
		ctx  context.Context
	}{
		{"Background", context.Background()},
		{"WithTimeout", timeout},
		{"PooledCall", &handler.Call{Route: "A/Pooled"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := RefuseWait(bc.ctx, "calling", "B/Other"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRun measures what the runner adds to a raw call: the handler
// through Route.ServeOwn in a Response whose length is set and checked
// against the frame limit (what the reactor's inline path did before the
// runner), through Run, and through Run as an inline call (watched, one
// call in 64 timed).
//
//	go test -run '^$' -bench 'Run$' -cpu 1 ./handler/transport
func BenchmarkRun(b *testing.B) {
	reg := handler.NewRegistry()
	reg.HandleFunc("Bench/Echo", func(_ context.Context, req, reply []byte) ([]byte, error) {
		return append(reply, req...), nil
	})
	rt := reg.Lookup([]byte("Bench/Echo"))
	req := make([]byte, 16)
	out := make([]byte, 0, 256)
	call := &handler.Call{Route: "Bench/Echo", ID: 1, Inline: true}
	r := &Runner{}
	b.Run("ServeOwn", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var start int
			var own []byte
			var err error
			out, start = proto.BeginResponse(out[:0], call.ID, call.Codec)
			if out, own, err = rt.ServeOwn(call, req, out, 64<<10); err != nil || proto.FinishFrameWith(out, start, len(own)) > proto.DefaultMaxFrameSize {
				b.Fatal(err)
			}
		}
	})
	// The Job is built field by field, as the reactor does (conn.handleCall).
	b.Run("Run", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var j Job
			j.Route, j.Call, j.Req, j.Large = rt, call, req, 64<<10
			out, _ = r.Run(&j, out[:0])
		}
	})
	b.Run("RunInline", func(b *testing.B) {
		b.ReportAllocs()
		w := new(Watch)
		for b.Loop() {
			var j Job
			j.Route, j.Call, j.Req, j.Large, j.Watch = rt, call, req, 64<<10, w
			out, _ = r.Run(&j, out[:0])
		}
	})
}
