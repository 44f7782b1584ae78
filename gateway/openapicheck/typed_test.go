package openapicheck_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/gateway"
	"github.com/rpcd/rpcd/handler"
)

// TestTypedClient generates a TypeScript client from the gateway's
// /openapi.json as a web developer would, with openapi-typescript's
// default options, compiles ts/client.ts against it with tsc --strict
// (ts/client.ts also holds calls the types must refuse, marked
// @ts-expect-error: tsc fails if one compiles), and runs it with
// openapi-fetch against the gateway: /rpc/Math/Sum, an error, and
// /jsonrpc with params as an object, by position and in a batch.
//
// It needs node and the packages of ts/package-lock.json (cd ts && npm
// ci); without them it skips, unless RPCD_OPENAPI_TS_REQUIRE is set, as
// .ci/run sets it.
func TestTypedClient(t *testing.T) {
	dir, err := filepath.Abs("ts")
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	modules := filepath.Join(dir, "node_modules")
	if _, serr := os.Stat(filepath.Join(modules, "openapi-fetch")); err != nil || serr != nil {
		if os.Getenv("RPCD_OPENAPI_TS_REQUIRE") != "" {
			t.Fatalf("node (%v) or ts/node_modules (%v) missing: cd gateway/openapicheck/ts && npm ci", err, serr)
		}
		t.Skip("needs node and ts/node_modules: cd gateway/openapicheck/ts && npm ci")
	}

	// The gateway as `rpcd serve -gateway` mounts it.
	reg := handler.NewRegistry()
	register(reg)
	gw := gateway.New(reg, gateway.Options{})
	mux := http.NewServeMux()
	mux.Handle(gateway.JSONRPCPath, gw.JSONRPC())
	mux.Handle(gateway.OpenAPIPath, gw.OpenAPI(gateway.OpenAPIOptions{JSONRPCPath: gateway.JSONRPCPath}))
	mux.Handle("/", gw)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	// A project of its own: the client, its tsconfig and package.json,
	// the packages linked, and the types generated into gen/.
	work := t.TempDir()
	for _, name := range []string{"client.ts", "tsconfig.json", "package.json"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(modules, filepath.Join(work, "node_modules")); err != nil {
		t.Fatal(err)
	}
	resp, doc := do(t, mustRequest(t, http.MethodGet, srv.URL+gateway.OpenAPIPath))
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", gateway.OpenAPIPath, resp.StatusCode)
	}
	if err := os.WriteFile(filepath.Join(work, "openapi.json"), doc, 0o644); err != nil {
		t.Fatal(err)
	}
	runNode(t, work, node, filepath.Join(modules, "openapi-typescript", "bin", "cli.js"), "openapi.json", "-o", "gen/api.d.ts")
	if b, _ := os.ReadFile(filepath.Join(work, "gen", "api.d.ts")); bytes.Contains(b, []byte("params?: Record<string, never>")) {
		t.Error("openapi-typescript reads JSON-RPC's params as an object with no fields")
	}
	runNode(t, work, node, filepath.Join(modules, "typescript", "bin", "tsc"), "-p", ".")
	out := runNode(t, work, node, "dist/client.js", srv.URL)
	if n := strings.Count(out, "ok "); n != 4 || strings.Contains(out, "FAIL") {
		t.Errorf("the client's checks: %d of 4 passed:\n%s", n, out)
	}
}

// runNode runs node with args in dir and returns its output; it fails the
// test if node does.
func runNode(t *testing.T, dir, node string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func mustRequest(t *testing.T, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
