package handler

import (
	"context"
	"strings"
	"testing"
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
