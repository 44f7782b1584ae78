package handler

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/proto"
)

// BenchmarkTypedJSON serves typed routes with JSON arguments and replies,
// without a transport: sonic's decode and encode plus the handler.
func BenchmarkTypedJSON(b *testing.B) {
	type multi struct {
		I32 int32   `json:"i32"`
		I64 int64   `json:"i64"`
		B   bool    `json:"b"`
		F64 float64 `json:"f64"`
		S   string  `json:"s"`
	}
	long := `"` + strings.Repeat("0123456789abcdef", 125) + `"`
	for _, bc := range []struct {
		name string
		h    Handler
		req  string
	}{
		{"Struct", Func(func(_ context.Context, in multi) (multi, error) { return in, nil }),
			`{"i32":1,"i64":2,"b":true,"f64":3.5,"s":"sixteen bytes..."}`},
		{"String2000", Func(func(_ context.Context, s string) (string, error) { return s, nil }), long},
		{"String2000Escaped", Func(func(_ context.Context, s string) (string, error) { return s, nil }), strings.Replace(long, "0", `\n`, 1)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := &Call{Codec: 1}
			req := []byte(bc.req)
			buf := make([]byte, 0, 4096)
			b.SetBytes(int64(len(req)))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if buf, err = bc.h.ServeRPC(c, req, buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRefuseWait measures the check every client call that waits
// makes first: for a caller's own context, what a call pays when it is
// not refused.
//
//	go test -run '^$' -bench RefuseWait ./handler
func BenchmarkRefuseWait(b *testing.B) {
	timeout, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for _, bc := range []struct {
		name string
		ctx  context.Context
	}{
		{"Background", context.Background()},
		{"WithTimeout", timeout},
		{"PooledCall", &Call{Route: "A/Pooled"}},
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
//	go test -run '^$' -bench 'Run$' -cpu 1 ./handler
func BenchmarkRun(b *testing.B) {
	reg := NewRegistry()
	reg.HandleFunc("Bench/Echo", func(_ context.Context, req, reply []byte) ([]byte, error) {
		return append(reply, req...), nil
	})
	rt := reg.Lookup([]byte("Bench/Echo"))
	req := make([]byte, 16)
	out := make([]byte, 0, 256)
	call := &Call{Route: "Bench/Echo", ID: 1, Inline: true}
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
