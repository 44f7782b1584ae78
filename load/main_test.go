package load

import (
	"context"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/leaktest"
	"github.com/rpcd/rpcd/reactor"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// runTimeout bounds a test's calls, generous for a loaded CI machine.
const runTimeout = 20 * time.Second

// serveBuiltin serves the built-in routes (Sys/Stats among them) on a
// loopback port in this process, on one event loop, until the test ends,
// and returns the address.
func serveBuiltin(t testing.TB) string {
	t.Helper()
	reg := handler.NewRegistry()
	builtin.Register(reg)
	var srv *reactor.Server
	builtin.HandleStats(reg, func() int { return srv.Conns() })
	srv = reactor.New(reg, reactor.Options{Loops: 1})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return srv.Addr().String()
}
