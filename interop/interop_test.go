package interop_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/reactor"
)

// TestPythonClient runs interop/python/test_interop.py, a client written from
// docs/protocol.md alone, against an in-process rpcd server.
func TestPythonClient(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not on PATH; skipping the Python interop test")
	}

	reg := handler.NewRegistry()
	builtin.Register(reg)
	s := reactor.New(reg, reactor.Options{})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, scriptPath(t), s.Addr().String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python interop test failed: %v\n%s", err, out)
	}
	t.Logf("python interop test output:\n%s", out)
}

// scriptPath is python/test_interop.py next to this test file.
func scriptPath(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		// go test runs in the package directory, which holds this file.
		file = "interop_test.go"
	}
	p, err := filepath.Abs(filepath.Join(filepath.Dir(file), "python", "test_interop.py"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}
