// Package servertest starts an rpcd server for a test: the reactor on a
// loopback port of its own, shut down when the test ends.
package servertest

import (
	"context"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/reactor"
)

// shutdownLimit bounds the shutdown at the test's end.
const shutdownLimit = 10 * time.Second

// Start serves reg with opts on 127.0.0.1 at a port of its own, and has
// the test shut the server down when it ends (after the cleanups the test
// registers later, which run first), failing the test if that fails.
func Start(t testing.TB, reg *handler.Registry, opts reactor.Options) *reactor.Server {
	t.Helper()
	s := reactor.New(reg, opts)
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatalf("start the server: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownLimit)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shut the server down: %v", err)
		}
	})
	return s
}
