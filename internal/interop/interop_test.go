package interop_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/rpcd/rpcd/auth"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/peertest"
	"github.com/rpcd/rpcd/internal/servertest"
	"github.com/rpcd/rpcd/reactor"
)

// TestPythonClient runs internal/interop/python/test_interop.py, a client written from
// docs/protocol.md alone, against an in-process rpcd server: the built-in
// routes, and the test routes of peertest.Register (prefix Interop), through which the server
// calls the client back; and against a second one with topic permissions
// (startTopicsServer), whose address it finds in $RPCD_INTEROP_TOPICS.
func TestPythonClient(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not on PATH; skipping the Python interop test")
	}

	reg := handler.NewRegistry()
	builtin.Register(reg)
	peertest.Register(reg, "Interop")
	s := servertest.Start(t, reg, reactor.Options{})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, scriptPath(t), s.Addr().String())
	cmd.Env = append(os.Environ(), "RPCD_INTEROP_TOPICS="+startTopicsServer(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python interop test failed: %v\n%s", err, out)
	}
	t.Logf("python interop test output:\n%s", out)
}

// startTopicsServer serves the built-in routes with topic permissions until
// the test ends, and returns its address: tokA authenticates alice, a
// reader, who may subscribe to orders.> and publish nowhere; tokW wendy, a
// writer, who may publish to orders.>.
func startTopicsServer(t *testing.T) string {
	topics, err := auth.Topics(map[string]auth.TopicRules{
		"reader": {Subscribe: auth.TopicList{Allow: []string{"orders.>"}}},
		"writer": {Publish: auth.TopicList{Allow: []string{"orders.>"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := handler.NewRegistry()
	builtin.Register(reg)
	s := servertest.Start(t, reg, reactor.Options{
		Authenticator: auth.Tokens{
			"tokA": {Subject: "alice", Roles: []string{"reader"}},
			"tokW": {Subject: "wendy", Roles: []string{"writer"}},
		},
		Topics: topics,
	})
	return s.Addr().String()
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
