package daemon

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/ws"
)

// serveHTTP runs a daemon with a gateway and an admin listener on
// loopback, with cfg's other settings, and returns their base URLs.
func serveHTTP(t *testing.T, cfg Config) (gw, adm string) {
	t.Helper()
	cfg.Addr, cfg.Gateway, cfg.Admin = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	var log syncBuffer
	d, err := New(cfg, WithLogOutput(&log))
	if err != nil {
		t.Fatal(err)
	}
	run(t, d)
	return "http://" + d.GatewayAddr().String(), "http://" + d.AdminAddr().String()
}

// do sends a request and returns the response with its body read.
func do(t *testing.T, method, url, body string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	// A transport of its own, which neither asks for gzip nor expands it.
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestHTTPRules walks every HTTP endpoint of `rpcd serve -gateway -admin`
// both ways (docs/gateway.md, "HTTP rules"): each that takes a body
// expands one in zstd or gzip and refuses another coding with 415 and
// Accept-Encoding; each reply of -compress-min bytes or more goes in the
// coding Accept-Encoding asks for, with Vary, and is the same reply once
// expanded.
func TestHTTPRules(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CompressMin = 64 // every reply below is past it
	gw, adm := serveHTTP(t, cfg)

	sum := []byte(`{"a":1,"b":2}`)
	call := []byte(`{"jsonrpc":"2.0","method":"Math/Sum","params":{"a":1,"b":2},"id":7}`)
	for _, tc := range []struct {
		name, url string
		body      []byte
		want      string
	}{
		{"/rpc/", gw + "/rpc/Math/Sum", sum, "3"},
		{"/jsonrpc", gw + "/jsonrpc", call, `{"jsonrpc":"2.0","result":3,"id":7}` + "\n"},
	} {
		for _, zip := range compression.Supported() {
			resp, b := do(t, "POST", tc.url, string(compression.Append(nil, tc.body, zip)), "Content-Type", "application/json", "Content-Encoding", zip.String())
			if resp.StatusCode != 200 || string(b) != tc.want {
				t.Errorf("%s, a body in %v: %d %q, want 200 %q", tc.name, zip, resp.StatusCode, b, tc.want)
			}
		}
		resp, b := do(t, "POST", tc.url, string(tc.body), "Content-Type", "application/json", "Content-Encoding", "br")
		if resp.StatusCode != http.StatusUnsupportedMediaType || resp.Header.Get("Accept-Encoding") != "zstd, gzip" || !bytes.Contains(b, []byte(`"InvalidArgument"`)) {
			t.Errorf("%s, a body in br: %d, Accept-Encoding %q, %s; want 415, zstd, gzip, InvalidArgument", tc.name, resp.StatusCode, resp.Header.Get("Accept-Encoding"), b)
		}
	}

	routes := `{"jsonrpc":"2.0","method":"Sys/Routes","id":1}`
	for _, tc := range []struct {
		name, method, url, body string
	}{
		{"/rpc/ reply", "POST", gw + "/rpc/Sys/Routes", "{}"},
		{"/rpc/ error body", "POST", gw + "/rpc/No/" + strings.Repeat("x", 300), "{}"}, // its message names the route
		{"/jsonrpc reply", "POST", gw + "/jsonrpc", routes},
		{"/openapi.json", "GET", gw + "/openapi.json", ""},
		{"admin /stats.json", "GET", adm + "/stats.json", ""},
		{"admin /history.json", "GET", adm + "/history.json", ""},
	} {
		ct := []string{"Content-Type", "application/json"}
		if tc.method == "GET" {
			ct = nil
		}
		plainResp, plain := do(t, tc.method, tc.url, tc.body, ct...)
		if plainResp.Header.Get("Content-Encoding") != "" || len(plain) < cfg.CompressMin {
			t.Fatalf("%s without Accept-Encoding: Content-Encoding %q, %d bytes; want none and at least %d", tc.name, plainResp.Header.Get("Content-Encoding"), len(plain), cfg.CompressMin)
		}
		for _, zip := range compression.Supported() {
			resp, b := do(t, tc.method, tc.url, tc.body, append(ct, "Accept-Encoding", zip.String())...)
			if ce := resp.Header.Get("Content-Encoding"); ce != zip.String() || !strings.Contains(resp.Header.Get("Vary"), "Accept-Encoding") {
				t.Errorf("%s, Accept-Encoding %v: %d, Content-Encoding %q, Vary %q", tc.name, zip, resp.StatusCode, ce, resp.Header.Get("Vary"))
				continue
			}
			got, err := compression.Expand(nil, b, zip, 1<<24)
			if err != nil {
				t.Errorf("%s, Accept-Encoding %v: %v", tc.name, zip, err)
				continue
			}
			if resp.StatusCode != plainResp.StatusCode || len(got) == 0 || got[0] != plain[0] || (tc.name != "admin /stats.json" && tc.name != "admin /history.json" && !bytes.Equal(got, plain)) {
				t.Errorf("%s, Accept-Encoding %v: %d, %.80q expanded; want %d, %.80q", tc.name, zip, resp.StatusCode, got, plainResp.StatusCode, plain)
			}
		}
	}
	// HEAD says the length GET would send, compressed as GET would be.
	get, _ := do(t, "GET", gw+"/openapi.json", "", "Accept-Encoding", "gzip")
	head, b := do(t, "HEAD", gw+"/openapi.json", "", "Accept-Encoding", "gzip")
	if len(b) != 0 || head.Header.Get("Content-Encoding") != "gzip" || head.Header.Get("Content-Length") != get.Header.Get("Content-Length") {
		t.Errorf("HEAD /openapi.json: %d bytes, Content-Encoding %q, Content-Length %s; GET's %s", len(b), head.Header.Get("Content-Encoding"), head.Header.Get("Content-Length"), get.Header.Get("Content-Length"))
	}
}

// TestGatewayCORS: -gateway-cors reaches the gateway (a preflight from a
// listed origin answered, another refused) and /ws, which then takes
// WebSockets from those origins and the gateway's own, and no others;
// without it, /ws takes any origin and a preflight is 405.
func TestGatewayCORS(t *testing.T) {
	const page = "http://app.example"
	dial := func(gw, origin string) int {
		t.Helper()
		h := http.Header{}
		if origin != "" {
			h.Set("Origin", origin)
		}
		d := websocket.Dialer{Subprotocols: []string{ws.Subprotocol}, HandshakeTimeout: waitTimeout}
		c, resp, err := d.Dial("ws"+strings.TrimPrefix(gw, "http")+ws.Path, h)
		if err == nil {
			c.Close()
		}
		if resp == nil {
			t.Fatalf("/ws from %q: %v", origin, err)
		}
		return resp.StatusCode
	}
	preflight := func(gw, origin string) *http.Response {
		t.Helper()
		resp, _ := do(t, "OPTIONS", gw+"/rpc/Math/Sum", "", "Origin", origin,
			"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type, rpcd-timeout")
		return resp
	}

	cfg := DefaultConfig()
	cfg.GatewayCORS = page + ", http://other.example"
	gw, _ := serveHTTP(t, cfg)
	if resp := preflight(gw, page); resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != page ||
		resp.Header.Get("Access-Control-Allow-Headers") != "content-type, rpcd-timeout" || resp.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("preflight from %s: %d %v", page, resp.StatusCode, resp.Header)
	}
	if resp := preflight(gw, "http://evil.example"); resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from another origin: %d %v", resp.StatusCode, resp.Header)
	}
	for _, tc := range []struct {
		origin string
		status int
	}{
		{"", http.StatusSwitchingProtocols},
		{page, http.StatusSwitchingProtocols},
		{gw, http.StatusSwitchingProtocols}, // the gateway's own origin
		{"http://evil.example", http.StatusForbidden},
	} {
		if got := dial(gw, tc.origin); got != tc.status {
			t.Errorf("/ws with -gateway-cors, Origin %q: %d, want %d", tc.origin, got, tc.status)
		}
	}

	cfg.GatewayCORSCred = true
	gw, _ = serveHTTP(t, cfg)
	if resp := preflight(gw, page); resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Credentials") != "true" {
		t.Errorf("preflight with -gateway-cors-credentials: %d %v", resp.StatusCode, resp.Header)
	}

	gw, _ = serveHTTP(t, DefaultConfig())
	if resp := preflight(gw, page); resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight without -gateway-cors: %d %v", resp.StatusCode, resp.Header)
	}
	if got := dial(gw, "http://evil.example"); got != http.StatusSwitchingProtocols {
		t.Errorf("/ws without -gateway-cors, from another origin: %d, want 101", got)
	}
}

// TestGatewayCORSValidate: the settings' mistakes are named before
// anything starts.
func TestGatewayCORSValidate(t *testing.T) {
	for _, tc := range []struct {
		cors string
		cred bool
		want string
	}{
		{"app.example", false, "gateway-cors: origin app.example: want http:// or https://"},
		{"https://app.example/path", false, "an origin has no path"},
		{"*, https://app.example", false, "origin * stands alone"},
		{"*", true, "origin * with credentials"},
		{"", true, "gateway-cors-credentials goes with gateway-cors"},
	} {
		cfg := DefaultConfig()
		cfg.Gateway, cfg.GatewayCORS, cfg.GatewayCORSCred = "127.0.0.1:0", tc.cors, tc.cred
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("-gateway-cors %q, credentials %v: %v, want %q", tc.cors, tc.cred, err, tc.want)
		}
	}
	cfg := DefaultConfig()
	cfg.Gateway, cfg.GatewayCORS, cfg.GatewayCORSCred = "127.0.0.1:0", "https://app.example, http://localhost:3000", true
	if err := cfg.Validate(); err != nil {
		t.Errorf("two origins with credentials: %v", err)
	}
}
