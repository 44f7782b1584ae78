// Package ts_test runs the TypeScript client's tests of what `rpcd serve`
// cannot make a server do: call its client back, push to it, open a stream
// to it. The routes that do are this file's, on an in-process server.
package ts_test

import (
	"context"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/peertest"
	"github.com/rpcd/rpcd/internal/servertest"
	"github.com/rpcd/rpcd/reactor"
	"github.com/rpcd/rpcd/ws"
)

// TestTSClientServed runs test/reverse.test.mjs (the built package in
// dist/, from `npm ci && npm run build`) against a server with the routes
// of registerCallBack, over TCP ($RPCD_TS_TCP) and WebSocket
// ($RPCD_TS_WS). It skips without node or dist/, unless
// RPCD_TS_REQUIRE=1, as CI sets once it has built the package.
func TestTSClientServed(t *testing.T) {
	dir := packageDir(t)
	required := os.Getenv("RPCD_TS_REQUIRE") == "1"
	node, err := exec.LookPath("node")
	if err != nil {
		if required {
			t.Fatal("node not on PATH")
		}
		t.Skip("node not on PATH; skipping the TypeScript client's test")
	}
	if _, err := os.Stat(filepath.Join(dir, "dist", "node.js")); err != nil {
		if required {
			t.Fatalf("the package is not built: %v", err)
		}
		t.Skip("clients/ts is not built (npm ci && npm run build); skipping its test")
	}

	reg := handler.NewRegistry()
	builtin.Register(reg)
	registerCallBack(reg)
	s := servertest.Start(t, reg, reactor.Options{})
	hs := httptest.NewServer(ws.Handler(s, ws.Options{}))
	t.Cleanup(hs.Close) // before the server's shutdown

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("test", "run.mjs"), filepath.Join("test", "reverse.test.mjs"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"RPCD_TS_TCP="+s.Addr().String(),
		"RPCD_TS_WS=ws"+strings.TrimPrefix(hs.URL, "http")+ws.Path,
	)
	cmd.WaitDelay = 5 * time.Second // the runner's children may hold the output open
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("test/reverse.test.mjs failed: %v\n%s", err, out)
	}
	t.Logf("test/reverse.test.mjs:\n%s", out)
}

// StreamToClient is what Test/StreamToClient takes: the server opens a
// stream to Route on the calling client, writes Data, ends its direction,
// and answers what the client's handler sent back.
type StreamToClient struct {
	Route string `json:"route"`
	Data  []byte `json:"data"`
}

// registerCallBack adds the routes through which the test has the server
// call its client: Test/CallMeBack and Test/StreamToClient (Blocking, as
// handlers that wait for their peer must be) and Test/Push.
func registerCallBack(reg *handler.Registry) {
	peertest.Register(reg, "Test")
	reg.Handle("Test/StreamToClient", handler.Func(func(ctx context.Context, in StreamToClient) (peertest.CalledBack, error) {
		st, err := handler.CallFrom(ctx).Peer.(handler.StreamOpener).OpenStream(ctx, in.Route)
		if err != nil {
			return peertest.Failed(err), nil
		}
		if _, err := st.Write(in.Data); err != nil {
			return peertest.Failed(err), nil
		}
		if err := st.CloseSend(); err != nil {
			return peertest.Failed(err), nil
		}
		reply, err := io.ReadAll(st)
		if err != nil {
			return peertest.Failed(err), nil
		}
		return peertest.CalledBack{Reply: reply}, nil
	}), handler.Blocking())
}

// packageDir is clients/ts, which holds this file.
func packageDir(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		file = "reverse_test.go" // go test runs in the package directory
	}
	dir, err := filepath.Abs(filepath.Dir(file))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
