package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/rpcd/rpcd/gateway"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/reactor"
)

// TestServeDescribe runs describe against `rpcd serve`: every route, one,
// -json, an unknown route (exit 1), a usage mistake (exit 78), and a
// server without Sys/Describe.
func TestServeDescribe(t *testing.T) {
	s := serveInProcess(t, nil)

	out, errOut, code := callInProcess("describe", "-addr", s.addr)
	for _, want := range []string{
		"Bench/EchoPacket: raw: bytes in, bytes out, in the request's codec\n",
		"\nBench/StreamSink: stream: bytes both ways\n",
		"\nMath/Sum: typed\n  argument builtin.SumArgs {\n    a int64\n    b int64\n  }\n  reply    int64\n",
		"\nSys/Stats: typed, blocking\n",
		"\nTest/Block: typed, blocking\n  argument struct {}\n  reply    int64\n",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("describe: exit status %d, stderr %q; stdout lacks %q:\n%s", code, errOut, want, out)
		}
	}

	out, errOut, code = callInProcess("describe", "-addr", s.addr, "Test/Meta")
	if want := "Test/Meta: typed\n  argument struct {}\n  reply    string\n"; code != 0 || out != want {
		t.Errorf("describe Test/Meta: exit status %d, stderr %q, stdout\n%s\nwant\n%s", code, errOut, out, want)
	}

	out, errOut, code = callInProcess("describe", "-addr", s.addr, "-json", "Math/Sum")
	want := `[{"name":"Math/Sum","kind":"typed","argument":{"title":"builtin.SumArgs","type":"object","properties":{"a":{"type":"integer","format":"int64"},"b":{"type":"integer","format":"int64"}}},"reply":{"type":"integer","format":"int64"}}]` + "\n"
	if code != 0 || out != want {
		t.Errorf("describe -json: exit status %d, stderr %q, stdout\n%s\nwant\n%s", code, errOut, out, want)
	}

	if out, errOut, code := callInProcess("describe", "-addr", s.addr, "No/Such"); code != exitFail || out != "" || errOut != "rpcd: not found: no route No/Such\n" {
		t.Errorf("describe No/Such: exit status %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, args := range [][]string{{"A/B", "C/D"}, {""}, {"-timeout", "0s"}} {
		if _, errOut, code := callInProcess(append([]string{"describe", "-addr", s.addr}, args...)...); code != exitUsage || !strings.Contains(errOut, "usage: rpcd describe") {
			t.Errorf("describe %q: exit status %d, stderr %q; want %d and the usage", args, code, errOut, exitUsage)
		}
	}

	// A server that has no Sys/Describe.
	reg := handler.NewRegistry()
	reg.HandleFunc(builtin.Ping, func(_ context.Context, _, reply []byte) ([]byte, error) { return reply, nil })
	old := reactor.New(reg, reactor.Options{Loops: 1})
	if err := old.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer old.Shutdown(context.Background())
	if _, errOut, code := callInProcess("describe", "-addr", old.Addr().String()); code != exitFail || !strings.Contains(errOut, "has no Sys/Describe") {
		t.Errorf("describe of a server without Sys/Describe: exit status %d, stderr %q", code, errOut)
	}
}

// TestServeGatewayOpenAPI: `rpcd serve -gateway` serves the gateway's
// OpenAPI document at /openapi.json, with its routes (the test's among
// them) and JSON-RPC.
func TestServeGatewayOpenAPI(t *testing.T) {
	s := serveInProcess(t, nil, "-gateway", "127.0.0.1:0")
	hc := &http.Client{Timeout: runTimeout, Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://" + gatewayAddr(t, s.log.String()) + gateway.OpenAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /openapi.json: %d, %v", resp.StatusCode, err)
	}
	for _, p := range []string{"/rpc/Math/Sum", "/rpc/Sys/Describe", "/rpc/Test/Block", gateway.JSONRPCPath} {
		if doc.Paths[p]["post"] == nil {
			t.Errorf("the document has no POST %s", p)
		}
	}
	if doc.OpenAPI != "3.1.0" || doc.Paths["/rpc/Bench/StreamSink"] != nil {
		t.Errorf("openapi %q; stream route %v", doc.OpenAPI, doc.Paths["/rpc/Bench/StreamSink"])
	}
}
