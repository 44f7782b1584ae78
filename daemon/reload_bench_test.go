package daemon

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rpcd/rpcd/auth"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/ratelimit"
)

// reloadable returns the route Test/Nop, which does nothing, of a daemon
// with roles and rate limits on it (or none), and a call of an identity
// that may call it.
func reloadable(tb testing.TB, on bool) (*handler.Route, *handler.Call) {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	if on {
		tokens := filepath.Join(tb.TempDir(), "tokens")
		writeFile(tb, tokens, "tok-o olga ops\n")
		cfg.AuthTokens, cfg.AuthRequire, cfg.RateLimit = tokens, "Test/Nop=ops", "Test/Nop=1e12:1000000000"
	}
	d, err := New(cfg, WithLogOutput(&syncBuffer{}))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	return nop(d.Registry())
}

// nop registers Test/Nop on reg and returns it, with a call of an identity
// of role ops.
func nop(reg *handler.Registry) (*handler.Route, *handler.Call) {
	reg.HandleFunc("Test/Nop", func(_ context.Context, _, reply []byte) ([]byte, error) { return reply, nil })
	c := &handler.Call{Route: "Test/Nop", Codec: proto.CodecRaw, Identity: &handler.Identity{Subject: "olga", Roles: []string{"ops"}}}
	return reg.Lookup([]byte("Test/Nop")), c
}

// TestReloadableAllocs: a call through the daemon's reloadable roles and
// rate limits allocates nothing, with both on and with both off.
func TestReloadableAllocs(t *testing.T) {
	for _, on := range []bool{false, true} {
		rt, c := reloadable(t, on)
		reply := make([]byte, 0, 64)
		if _, err := rt.Serve(c, nil, reply); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(1000, func() { _, _ = rt.Serve(c, nil, reply[:0]) }); n != 0 {
			t.Errorf("roles and limits on %v: %v allocations a call, want 0", on, n)
		}
	}
}

// BenchmarkReloadable: what a call pays for roles and rate limits that a
// reload can swap, against the fixed middleware the daemon used before
// (auth.Require, ratelimit.PerRoute), against a middleware that does
// nothing and against none.
//
//	go test -run '^$' -bench Reloadable -count 5 ./daemon
func BenchmarkReloadable(b *testing.B) {
	serve := func(b *testing.B, rt *handler.Route, c *handler.Call) {
		b.ReportAllocs()
		reply := make([]byte, 0, 64)
		for b.Loop() {
			if _, err := rt.Serve(c, nil, reply[:0]); err != nil {
				b.Fatal(err)
			}
		}
	}
	fixed := func(mw ...handler.Middleware) (*handler.Route, *handler.Call) {
		reg := handler.NewRegistry()
		for _, m := range mw {
			reg.Use(m)
		}
		return nop(reg)
	}
	b.Run("none", func(b *testing.B) {
		rt, c := fixed()
		serve(b, rt, c)
	})
	b.Run("passthrough", func(b *testing.B) { // a middleware that does nothing: what being one costs
		rt, c := fixed(func(next handler.Handler) handler.Handler {
			return handler.HandlerFunc(func(ctx context.Context, req, reply []byte) ([]byte, error) {
				return next.ServeRPC(ctx, req, reply)
			})
		})
		serve(b, rt, c)
	})
	b.Run("fixed-on", func(b *testing.B) {
		rt, c := fixed(auth.Require(auth.Roles(map[string][]string{"Test/Nop": {"ops"}})),
			ratelimit.PerRoute(map[string]ratelimit.Limit{"Test/Nop": {Rate: 1e12, Burst: 1e9}}))
		serve(b, rt, c)
	})
	b.Run("reloadable-off", func(b *testing.B) {
		rt, c := reloadable(b, false)
		serve(b, rt, c)
	})
	b.Run("reloadable-on", func(b *testing.B) {
		rt, c := reloadable(b, true)
		serve(b, rt, c)
	})
}
