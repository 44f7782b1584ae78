package gateway_test

import (
	"bufio"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/rpcd/rpcd/auth"
	"github.com/rpcd/rpcd/gateway"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/proto"
)

// TestStats: every response is counted by route label and status as the
// client gets it (refusals before any handler, JSON-RPC's, and a wrapped
// handler's, a hijacked upgrade as 101), with labels only for registered
// routes; every call answered with an error is counted by its code, and
// neither a path outside the prefix nor a JSON-RPC notification is.
func TestStats(t *testing.T) {
	g := gateway.New(testRegistry(t), gateway.Options{
		Limits:        proto.Limits{MaxFrameSize: 1024},
		Authenticator: auth.Tokens{"t-user": {Subject: "u"}},
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	mux := http.NewServeMux()
	mux.Handle(gateway.JSONRPCPath, g.JSONRPC())
	mux.Handle("/upgrade", g.Counted(gateway.RouteWebSocket, http.HandlerFunc(upgrade)))
	mux.Handle("/refuse", g.Counted("refuse", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusBadRequest)
	})))
	mux.Handle("/silent", g.Counted("silent", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	mux.Handle("/", g)
	url, c := serve(t, mux)
	token := []string{"Authorization", "Bearer t-user"}

	send := func(method, path, contentType, body string, headers ...string) int {
		t.Helper()
		req, err := http.NewRequest(method, url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name, method, path, contentType, body string
		headers                               []string
		status                                int
	}{
		{"a sum", "POST", "/rpc/Math/Sum", gateway.ContentJSON, `{"a":1,"b":2}`, token, 200},
		{"another", "POST", "/rpc/Math/Sum", gateway.ContentJSON, `{"a":3,"b":4}`, token, 200},
		{"a handler's error", "POST", "/rpc/Test/Fail", gateway.ContentJSON, `{"code":7,"message":"no"}`, token, 403},
		{"a bad argument", "POST", "/rpc/Math/Sum", gateway.ContentJSON, `{"a":"x"}`, token, 400},
		{"no credentials", "POST", "/rpc/Math/Sum", gateway.ContentJSON, `{}`, nil, 401},
		{"no such route", "POST", "/rpc/No/Such", gateway.ContentJSON, `{}`, token, 404},
		{"a made-up route, no credentials", "POST", "/rpc/Made/Up", gateway.ContentJSON, `{}`, nil, 401},
		{"outside the prefix", "GET", "/favicon.ico", "", "", nil, 404},
		{"GET", "GET", "/rpc/Math/Sum", "", "", token, 405},
		{"a form", "POST", "/rpc/Math/Sum", "text/plain", "a=1", token, 415},
		{"too large", "POST", "/rpc/Bytes/Echo", gateway.ContentRaw, strings.Repeat("x", 2000), token, 413},
		{"JSON-RPC batch", "POST", gateway.JSONRPCPath, gateway.ContentJSON,
			`[{"jsonrpc":"2.0","method":"Math/Sum","params":{"a":1,"b":2},"id":1},` + // OK
				`{"jsonrpc":"2.0","method":"No/Such","id":2},` + // NotFound
				`{"jsonrpc":"2.0","method":"Test/Fail","params":{"code":7}},` + // a notification: no answer, not counted
				`{"jsonrpc":"1.0","method":"Math/Sum","id":3}]`, // no request object: InvalidArgument
			token, 200},
		{"JSON-RPC, not JSON", "POST", gateway.JSONRPCPath, gateway.ContentJSON, `{"jsonrpc":`, token, 200},
		{"JSON-RPC notification", "POST", gateway.JSONRPCPath, gateway.ContentJSON, `{"jsonrpc":"2.0","method":"Math/Sum","params":{"a":1,"b":2}}`, token, 204},
		{"JSON-RPC GET", "GET", gateway.JSONRPCPath, "", "", nil, 405},
		{"JSON-RPC without credentials", "POST", gateway.JSONRPCPath, gateway.ContentJSON, `{"jsonrpc":"2.0","method":"Math/Sum","id":1}`, nil, 401},
		{"a wrapped refusal", "GET", "/refuse", "", "", nil, 400},
		{"a wrapped handler that writes nothing", "GET", "/silent", "", "", nil, 200},
	} {
		if got := send(tc.method, tc.path, tc.contentType, tc.body, tc.headers...); got != tc.status {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.status)
		}
	}
	if status := upgradeRequest(t, url); status != http.StatusSwitchingProtocols {
		t.Errorf("the upgrade answered %d, want 101", status)
	}

	// No wait: each response is counted before it is written.
	st := g.Stats()
	got := map[string]uint64{}
	for _, r := range st.Responses {
		got[r.Route+" "+http.StatusText(r.Status)] = r.Count
	}
	want := map[string]uint64{
		"Math/Sum OK":                         2,
		"Test/Fail Forbidden":                 1,
		"Math/Sum Bad Request":                1,
		"Math/Sum Unauthorized":               1,
		"unknown Not Found":                   2, // No/Such, /favicon.ico
		"unknown Unauthorized":                1, // Made/Up names no route: no label of its own
		"Math/Sum Method Not Allowed":         1,
		"Math/Sum Unsupported Media Type":     1,
		"Bytes/Echo Request Entity Too Large": 1,
		"jsonrpc OK":                          2,
		"jsonrpc No Content":                  1,
		"jsonrpc Method Not Allowed":          1,
		"jsonrpc Unauthorized":                1,
		"refuse Bad Request":                  1,
		"silent OK":                           1,
		"ws Switching Protocols":              1,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("responses %q: %d, want %d", k, got[k], w)
		}
	}
	for k, n := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("responses %q: %d, not expected", k, n)
		}
	}
	for i := 1; i < len(st.Responses); i++ {
		a, b := st.Responses[i-1], st.Responses[i]
		if a.Route > b.Route || a.Route == b.Route && a.Status >= b.Status {
			t.Errorf("Responses not sorted by route and status: %+v before %+v", a, b)
		}
	}

	wantErrors := map[proto.Code]uint64{
		proto.CodePermissionDenied:  1,         // Test/Fail
		proto.CodeInvalidArgument:   1 + 1 + 2, // a bad argument, a form; JSON-RPC: no request object, not JSON
		proto.CodeUnauthenticated:   2 + 1,     // two calls without credentials; one JSON-RPC request
		proto.CodeNotFound:          1 + 1,     // No/Such, and over JSON-RPC
		proto.CodeUnimplemented:     1 + 1,     // GET of a route and of /jsonrpc
		proto.CodeResourceExhausted: 1,         // too large
	}
	for code := range transport.CodeSlots {
		if got, want := st.Errors[code], wantErrors[proto.Code(code)]; got != want {
			t.Errorf("Errors[%s] = %d, want %d", gateway.CodeName(proto.Code(code)), got, want)
		}
	}
}

// upgrade answers as a WebSocket upgrade does: it hijacks the connection
// and writes 101 on it.
func upgrade(w http.ResponseWriter, _ *http.Request) {
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer conn.Close()
	_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n")
	_ = rw.Flush()
}

// upgradeRequest asks url's /upgrade to switch protocols and returns the
// status it answers.
func upgradeRequest(t *testing.T, url string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+"/upgrade", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "test")
	resp, err := (&http.Client{Timeout: waitLimit, Transport: &http.Transport{}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, bufio.NewReader(resp.Body))
	return resp.StatusCode
}
