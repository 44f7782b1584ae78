package interop_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/servertest"
	"github.com/rpcd/rpcd/reactor"
)

// TestNodeEdges runs internal/interop/node/edges.mjs, a client written in
// JavaScript from docs/protocol.md alone, against an in-process server
// with `rpcd serve`'s routes and default limits: the page's edge cases
// (pipelining, a peer held back, half-close, the lingering close, frames
// out of order, limits) checked against what the page says, each its own
// line in the output.
func TestNodeEdges(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not on PATH; skipping the Node.js edge checks")
	}
	if testing.Short() {
		t.Skip("the edge checks take seconds")
	}
	reg := handler.NewRegistry()
	builtin.Register(reg)
	// Set once the server runs; atomic, as the race detector cannot see that
	// no call comes before the Node process starts.
	var srv atomic.Pointer[reactor.Server]
	builtin.HandleStats(reg, func() int { return srv.Load().Conns() })
	builtin.HandleHealth(reg, func() bool { return srv.Load().Ready() })
	s := servertest.Start(t, reg, reactor.Options{})
	srv.Store(s)

	script, err := filepath.Abs(filepath.Join("node", "edges.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, script, s.Addr().String()).CombinedOutput()
	if err != nil {
		t.Fatalf("the Node.js edge checks failed: %v\n%s", err, out)
	}
	t.Logf("the Node.js edge checks:\n%s", out)
}
