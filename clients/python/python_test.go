package python_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/peertest"
	"github.com/rpcd/rpcd/internal/servertest"
	"github.com/rpcd/rpcd/reactor"
)

// TestServerCalls runs clients/python/tests/test_server_calls.py, the
// Python package's tests of what `rpcd serve` cannot exercise, against an
// in-process server with the built-in routes and the test routes of
// registerTestRoutes: the server's calls to the client and its pushes, and a
// handler that shows whether the client's Cancel and deadline reached it.
// The address goes to Python in $RPCD_PY_CALLBACK_ADDR. The rest of the
// package's tests run against `rpcd serve` on their own (.ci/run).
func TestServerCalls(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not on PATH; skipping the Python client's tests of calls from the server")
	}
	reg := handler.NewRegistry()
	builtin.Register(reg)
	registerTestRoutes(reg)
	s := servertest.Start(t, reg, reactor.Options{})

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "-v", "test_server_calls")
	cmd.Dir = testsDir(t)
	cmd.Env = append(os.Environ(), "RPCD_PY_CALLBACK_ADDR="+s.Addr().String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python tests failed: %v\n%s", err, out)
	}
	t.Logf("python tests:\n%s", out)
}

// WaitState is what PyTest/WaitState answers about the last PyTest/Wait:
// "waiting" while it runs, then its context's error ("context canceled",
// "context deadline exceeded"); DeadlineMS is what was left of its deadline
// when it started, -1 for none.
type WaitState struct {
	State      string `json:"state"`
	DeadlineMS int64  `json:"deadline_ms"`
}

// registerTestRoutes adds the routes test_server_calls.py uses:
// PyTest/CallMeBack (a Request from the server to the client, Blocking as a
// handler that waits for its peer must be), PyTest/Push (one-way messages),
// and PyTest/Wait with PyTest/WaitState (a Blocking handler that waits for
// its context to end, and what ended it).
func registerTestRoutes(reg *handler.Registry) {
	peertest.Register(reg, "PyTest")

	var mu sync.Mutex
	var last WaitState
	reg.Handle("PyTest/Wait", handler.Func(func(ctx context.Context, _ struct{}) (struct{}, error) {
		left := int64(-1)
		if dl, ok := ctx.Deadline(); ok {
			left = time.Until(dl).Milliseconds()
		}
		mu.Lock()
		last = WaitState{State: "waiting", DeadlineMS: left}
		mu.Unlock()
		<-ctx.Done()
		mu.Lock()
		last.State = ctx.Err().Error()
		mu.Unlock()
		return struct{}{}, ctx.Err()
	}), handler.Blocking())
	reg.Handle("PyTest/WaitState", handler.Func(func(context.Context, struct{}) (WaitState, error) {
		mu.Lock()
		defer mu.Unlock()
		return last, nil
	}))
}

// testsDir is tests/ next to this file.
func testsDir(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		file = "python_test.go" // go test runs in the package directory
	}
	p, err := filepath.Abs(filepath.Join(filepath.Dir(file), "tests"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}
