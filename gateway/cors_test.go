package gateway_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/rpcd/rpcd/gateway"
)

// corsServer serves a gateway's three endpoints with cors.
func corsServer(t *testing.T, cors gateway.CORS) (*gateway.Gateway, string, *http.Client) {
	g := gateway.New(testRegistry(t), gateway.Options{CORS: cors})
	mux := http.NewServeMux()
	mux.Handle("/rpc/", g)
	mux.Handle(gateway.JSONRPCPath, g.JSONRPC())
	mux.Handle(gateway.OpenAPIPath, g.OpenAPI(gateway.OpenAPIOptions{JSONRPCPath: gateway.JSONRPCPath}))
	url, c := serve(t, mux)
	return g, url, c
}

// send makes a request with the headers (pairs) and returns the status and
// headers of its response.
func send(t *testing.T, c *http.Client, method, url, body string, headers ...string) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// TestCORS: with origins listed, a preflight from one of them is answered
// on every endpoint with its methods and the headers the gateway reads
// among those asked for, a preflight from another is 403, and a call from
// a listed origin carries the headers that let its page read the reply;
// with none, no CORS header is sent and OPTIONS is 405.
func TestCORS(t *testing.T) {
	const page = "http://app.example:3000"
	g, url, c := corsServer(t, gateway.CORS{Origins: []string{page, "https://other.example"}})
	for _, tc := range []struct{ path, methods string }{
		{"/rpc/Math/Sum", "POST"},
		{gateway.JSONRPCPath, "POST"},
		{gateway.OpenAPIPath, "GET, HEAD"},
	} {
		status, h := send(t, c, "OPTIONS", url+tc.path, "", "Origin", page, "Access-Control-Request-Method", "POST",
			"Access-Control-Request-Headers", "Content-Type, Authorization, Rpcd-Timeout, Rpcd-Meta-Tenant, traceparent, X-Unknown")
		if status != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != page || h.Get("Access-Control-Allow-Methods") != tc.methods ||
			h.Get("Access-Control-Allow-Headers") != "content-type, authorization, rpcd-timeout, rpcd-meta-tenant, traceparent" ||
			h.Get("Access-Control-Max-Age") == "" || h.Get("Access-Control-Allow-Credentials") != "" || h.Get("Vary") != "Origin" {
			t.Errorf("preflight of %s: %d %v", tc.path, status, h)
		}
		status, h = send(t, c, "OPTIONS", url+tc.path, "", "Origin", "http://app.example:3001", "Access-Control-Request-Method", "POST")
		if status != http.StatusForbidden || h.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight of %s from another origin: %d %v, want 403 and no Access-Control-Allow-Origin", tc.path, status, h)
		}
	}

	status, h := send(t, c, "POST", url+"/rpc/Math/Sum", `{"a":1,"b":2}`, "Origin", page, "Content-Type", "application/json")
	if status != 200 || h.Get("Access-Control-Allow-Origin") != page || h.Get("Vary") != "Origin, Accept-Encoding" ||
		!strings.Contains(h.Get("Access-Control-Expose-Headers"), "WWW-Authenticate") {
		t.Errorf("a call from %s: %d %v", page, status, h)
	}
	status, h = send(t, c, "POST", url+"/rpc/Math/Sum", `{"a":1,"b":2}`, "Origin", "https://evil.example", "Content-Type", "application/json")
	if status != 200 || h.Get("Access-Control-Allow-Origin") != "" || h.Get("Vary") != "Origin, Accept-Encoding" {
		t.Errorf("a call from an origin not listed: %d %v, want 200 without Access-Control-Allow-Origin (its page may not read it)", status, h)
	}
	status, h = send(t, c, "POST", url+"/rpc/Math/Sum", `{"a":1,"b":2}`, "Content-Type", "application/json")
	if status != 200 || h.Get("Access-Control-Allow-Origin") != "" || h.Get("Vary") != "Origin, Accept-Encoding" {
		t.Errorf("a call without Origin: %d %v", status, h)
	}
	// An error reply from a listed origin can be read too.
	status, h = send(t, c, "POST", url+"/rpc/No/Such", `{}`, "Origin", page, "Content-Type", "application/json")
	if status != 404 || h.Get("Access-Control-Allow-Origin") != page {
		t.Errorf("a failed call from %s: %d %v", page, status, h)
	}
	// OPTIONS that is no preflight (no Access-Control-Request-Method) is
	// a method the route does not take.
	if status, _ := send(t, c, "OPTIONS", url+"/rpc/Math/Sum", "", "Origin", page); status != http.StatusMethodNotAllowed {
		t.Errorf("OPTIONS without Access-Control-Request-Method: %d, want 405", status)
	}
	st := g.Stats()
	counted := map[int]uint64{}
	for _, rc := range st.Responses {
		if rc.Route == "Math/Sum" {
			counted[rc.Status] = rc.Count
		}
	}
	if counted[http.StatusNoContent] != 1 || counted[http.StatusForbidden] != 1 {
		t.Errorf("Math/Sum's preflights counted as %v, want one 204 and one 403", counted)
	}

	// Credentials, when asked for.
	_, url, c = corsServer(t, gateway.CORS{Origins: []string{page}, Credentials: true})
	status, h = send(t, c, "OPTIONS", url+"/jsonrpc", "", "Origin", page, "Access-Control-Request-Method", "POST")
	if status != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != page || h.Get("Access-Control-Allow-Credentials") != "true" {
		t.Errorf("preflight with Credentials: %d %v", status, h)
	}

	// Any origin: "*", and the reply does not vary by Origin.
	_, url, c = corsServer(t, gateway.CORS{Origins: []string{"*"}})
	status, h = send(t, c, "POST", url+"/rpc/Math/Sum", `{"a":1,"b":2}`, "Origin", "https://anyone.example", "Content-Type", "application/json")
	if status != 200 || h.Get("Access-Control-Allow-Origin") != "*" || h.Get("Vary") != "Accept-Encoding" || h.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("a call with origin *: %d %v", status, h)
	}

	// Off: no header, and a preflight is a method the gateway does not take.
	_, url, c = corsServer(t, gateway.CORS{})
	for _, path := range []string{"/rpc/Math/Sum", gateway.JSONRPCPath, gateway.OpenAPIPath} {
		status, h = send(t, c, "OPTIONS", url+path, "", "Origin", page, "Access-Control-Request-Method", "POST")
		if status != http.StatusMethodNotAllowed || h.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("CORS off, preflight of %s: %d %v", path, status, h)
		}
	}
	status, h = send(t, c, "POST", url+"/rpc/Math/Sum", `{"a":1,"b":2}`, "Origin", page, "Content-Type", "application/json")
	if status != 200 || h.Get("Access-Control-Allow-Origin") != "" || h.Get("Vary") != "Accept-Encoding" {
		t.Errorf("CORS off, a call with Origin: %d %v", status, h)
	}
}

// TestParseOrigins: what -gateway-cors takes, and what it names as wrong.
func TestParseOrigins(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{"", nil, ""},
		{" https://app.example , http://localhost:3000 ", []string{"https://app.example", "http://localhost:3000"}, ""},
		{"*", []string{"*"}, ""},
		{"https://app.example/", []string{"https://app.example/"}, ""},
		{"app.example", nil, "want http:// or https://"},
		{"ftp://app.example", nil, "want http:// or https://"},
		{"https://", nil, "want scheme://host[:port]"},
		{"https://user@app.example", nil, "want scheme://host[:port]"},
		{"https://app.example/api", nil, "an origin has no path"},
		{"https://app.example?x=1", nil, "an origin has no path"},
		{"*, https://app.example", nil, "origin * stands alone"},
	} {
		got, err := gateway.ParseOrigins(tc.in)
		switch {
		case tc.err == "" && (err != nil || !slices.Equal(got, tc.want)):
			t.Errorf("ParseOrigins(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "rpcd: ")):
			t.Errorf("ParseOrigins(%q): %v, want an error saying %q", tc.in, err, tc.err)
		}
	}
	if err := (gateway.CORS{Origins: []string{"*"}, Credentials: true}).Validate(); err == nil {
		t.Error("origin * with credentials validated")
	}
}

// TestCheckOrigin: a WebSocket upgrade's Origin against the policy.
func TestCheckOrigin(t *testing.T) {
	cors := gateway.CORS{Origins: []string{"https://app.example"}}
	for _, tc := range []struct {
		origin, host string
		want         bool
	}{
		{"", "gw.example:8080", true},                       // not from a browser
		{"https://APP.example", "gw.example:8080", true},    // listed
		{"http://gw.example:8080", "gw.example:8080", true}, // the gateway's own origin
		{"https://evil.example", "gw.example:8080", false},
		{"http://gw.example:8081", "gw.example:8080", false},
	} {
		r, _ := http.NewRequest("GET", "http://"+tc.host+"/ws", nil)
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if got := cors.CheckOrigin(r); got != tc.want {
			t.Errorf("CheckOrigin, Origin %q to %s: %v, want %v", tc.origin, tc.host, got, tc.want)
		}
	}
}
