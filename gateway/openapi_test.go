package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/rpcd/rpcd/auth"
	"github.com/rpcd/rpcd/gateway"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/schema"
)

// oaNode is a recursive type, whose schema the document keeps in its
// components.
type oaNode struct {
	Name string    `json:"name"`
	Kids []*oaNode `json:"kids"`
}

// openAPIDoc fetches the document from a server mounting g's OpenAPI
// handler with opts, with the token if one is given.
func openAPIDoc(t *testing.T, g *gateway.Gateway, opts gateway.OpenAPIOptions, token string) (int, map[string]any) {
	t.Helper()
	srv := httptest.NewServer(g.OpenAPI(opts))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+gateway.OpenAPIPath, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return resp.StatusCode, nil
	}
	if ct := resp.Header.Get("Content-Type"); ct != gateway.ContentJSON || !json.Valid(body) {
		t.Fatalf("the document: Content-Type %q, valid JSON %v", ct, json.Valid(body))
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	return 200, doc
}

// at returns the value at the path of keys in v, or nil.
func at(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// compactJSON re-encodes v with its objects' keys sorted, for comparing.
// anyFields returns the schema s as JSON values, each object schema
// without properties or additionalProperties given additionalProperties
// {}: as the document gives them, so that generators read them as any
// object, as JSON Schema does, not as an object with no fields.
func anyFields(t *testing.T, s any) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(compactJSON(t, s)), &v); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			_, props := v["properties"]
			_, extra := v["additionalProperties"]
			_, ref := v["$ref"]
			isObject := v["type"] == "object"
			if types, ok := v["type"].([]any); ok {
				isObject = slices.Contains(types, any("object"))
			}
			if isObject && !props && !extra && !ref {
				v["additionalProperties"] = map[string]any{}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	return v
}

func compactJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(generic)
	return string(b)
}

// TestOpenAPIDocument checks the document's essentials without a
// validator (gateway/openapicheck has one): OpenAPI 3.1, a POST path per
// call route and none for stream routes, a typed route's schemas as
// Describe gives them, a raw route's media types, every error status with
// the error body, the headers, every $ref resolving and no $defs left,
// JSON-RPC when asked, routes registered later in the next document.
func TestOpenAPIDocument(t *testing.T) {
	reg := testRegistry(t)
	reg.Handle("Test/Node", handler.Func(func(_ context.Context, n oaNode) (*oaNode, error) { return &n, nil }))
	reg.HandleStream("Test/Stream", func(context.Context, handler.Stream) error { return nil })
	g := gateway.New(reg, gateway.Options{})
	_, doc := openAPIDoc(t, g, gateway.OpenAPIOptions{}, "")

	if v := at(doc, "openapi"); v != "3.1.0" {
		t.Errorf("openapi %v, want 3.1.0", v)
	}
	if at(doc, "info", "title") != "rpcd" || at(doc, "info", "version") != "1" {
		t.Errorf("info %v", at(doc, "info"))
	}
	paths, _ := at(doc, "paths").(map[string]any)
	var got, want []string
	for p := range paths {
		got = append(got, p)
	}
	for _, d := range schema.Descriptions(reg) {
		if d.Kind != schema.KindStream {
			want = append(want, "/rpc/"+d.Name)
		}
	}
	sort.Strings(got)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("paths %v\nwant  %v (every call route, no stream route, no JSON-RPC unless asked)", got, want)
	}
	for _, d := range schema.Descriptions(reg) {
		if d.Kind == schema.KindStream {
			continue
		}
		op := at(paths, "/rpc/"+d.Name, "post")
		if op == nil {
			t.Errorf("%s: no POST", d.Name)
			continue
		}
		if at(op, "operationId") != d.Name || at(op, "x-rpcd-kind") != d.Kind {
			t.Errorf("%s: operationId %v, x-rpcd-kind %v", d.Name, at(op, "operationId"), at(op, "x-rpcd-kind"))
		}
		body := at(op, "requestBody", "content")
		ok := at(op, "responses", "200", "content")
		if d.Kind == schema.KindRaw {
			if at(body, gateway.ContentRaw) == nil || at(ok, gateway.ContentRaw) == nil {
				t.Errorf("%s: a raw route without %s: %v, %v", d.Name, gateway.ContentRaw, body, ok)
			}
		} else if d.Name != "Test/Node" { // its schemas are moved to components: below
			if a, b := compactJSON(t, at(body, gateway.ContentJSON, "schema")), compactJSON(t, anyFields(t, d.Argument)); a != b {
				t.Errorf("%s: argument %s, Describe has %s (open objects with any fields)", d.Name, a, b)
			}
			if a, b := compactJSON(t, at(ok, gateway.ContentJSON, "schema")), compactJSON(t, anyFields(t, d.Reply)); a != b {
				t.Errorf("%s: reply %s, Describe has %s (open objects with any fields)", d.Name, a, b)
			}
		}
		for _, status := range []string{"400", "401", "403", "404", "408", "409", "413", "415", "429", "431", "499", "500", "501", "503", "504"} {
			if r := at(op, "responses", status, "$ref"); r != "#/components/responses/Error"+status {
				t.Errorf("%s: response %s is %v", d.Name, status, r)
			}
		}
		var params []string
		for _, p := range at(op, "parameters").([]any) {
			params = append(params, strings.TrimPrefix(at(p, "$ref").(string), "#/components/parameters/"))
		}
		if got := strings.Join(params, " "); got != "Rpcd-Timeout traceparent tracestate baggage" {
			t.Errorf("%s: parameters %s", d.Name, got)
		}
		if at(op, "security") != nil {
			t.Errorf("%s: security without an Authenticator", d.Name)
		}
	}
	if s := compactJSON(t, at(doc, "components", "responses", "Error404", "content", gateway.ContentJSON, "schema")); s != `{"$ref":"#/components/schemas/rpcd.Error"}` {
		t.Errorf("404's body: %s", s)
	}
	if s := compactJSON(t, at(doc, "components", "schemas", "rpcd.Error", "required")); s != `["code","message"]` {
		t.Errorf("the error body requires %s", s)
	}
	if at(doc, "security") != nil || at(doc, "components", "securitySchemes") != nil {
		t.Error("security without an Authenticator")
	}

	// The recursive type: in components, the argument's (nothing
	// required) and the reply's apart, each $ref resolving, no $defs.
	node := at(paths, "/rpc/Test/Node", "post")
	arg := compactJSON(t, at(node, "requestBody", "content", gateway.ContentJSON, "schema"))
	reply := compactJSON(t, at(node, "responses", "200", "content", gateway.ContentJSON, "schema"))
	if arg != `{"$ref":"#/components/schemas/oaNode"}` || reply != `{"anyOf":[{"$ref":"#/components/schemas/oaNode_2"},{"type":"null"}]}` {
		t.Errorf("Test/Node: argument %s, reply %s", arg, reply)
	}
	if s := compactJSON(t, at(doc, "components", "schemas", "oaNode_2", "properties", "kids")); s != `{"items":{"anyOf":[{"$ref":"#/components/schemas/oaNode_2"},{"type":"null"}]},"type":["array","null"]}` {
		t.Errorf("oaNode_2's kids: %s", s)
	}
	if at(doc, "components", "schemas", "oaNode", "required") != nil || at(doc, "components", "schemas", "oaNode_2", "required") == nil {
		t.Error("the argument's oaNode requires fields, or the reply's does not")
	}
	checkRefs(t, doc)

	// Asked for, JSON-RPC; registered later, a route.
	reg.HandleFunc("Late/Route", func(_ context.Context, _, reply []byte) ([]byte, error) { return reply, nil })
	_, doc = openAPIDoc(t, g, gateway.OpenAPIOptions{JSONRPCPath: "/jsonrpc", Title: "t", Version: "2"}, "")
	if at(doc, "paths", "/rpc/Late/Route", "post") == nil {
		t.Error("a route registered after the first document is not in the next")
	}
	if at(doc, "paths", "/jsonrpc", "post", "requestBody") == nil || at(doc, "info", "title") != "t" || at(doc, "info", "version") != "2" {
		t.Errorf("JSON-RPC %v, info %v", at(doc, "paths", "/jsonrpc"), at(doc, "info"))
	}
	methods := compactJSON(t, at(doc, "components", "schemas", "rpcd.JSONRPCRequest", "properties", "method", "enum"))
	if !strings.Contains(methods, `"Late/Route"`) || strings.Contains(methods, "Test/Stream") {
		t.Errorf("JSON-RPC methods %s: want every call route, no stream route", methods)
	}
	checkRefs(t, doc)
}

// checkRefs fails t for a $ref in doc that does not resolve, and for a
// $defs, which in a document would be read from its root.
func checkRefs(t *testing.T, doc map[string]any) {
	t.Helper()
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if k == "$defs" {
					t.Errorf("$defs left at %s", path)
				}
				if k == "$ref" {
					s, _ := e.(string)
					keys := strings.Split(strings.TrimPrefix(s, "#/"), "/")
					if !strings.HasPrefix(s, "#/") || at(doc, keys...) == nil {
						t.Errorf("$ref %v at %s does not resolve", e, path)
					}
				}
				walk(e, path+"/"+k)
			}
		case []any:
			for _, e := range v {
				walk(e, path+"[]")
			}
		}
	}
	walk(doc, "")
}

// TestOpenAPIAuth: with an Authenticator, the document has a bearer
// scheme every operation requires, and is served only with credentials;
// GET and HEAD only.
func TestOpenAPIAuth(t *testing.T) {
	reg := testRegistry(t)
	g := gateway.New(reg, gateway.Options{Authenticator: auth.Tokens{"t-good": {Subject: "alice"}}})
	if status, _ := openAPIDoc(t, g, gateway.OpenAPIOptions{}, ""); status != 401 {
		t.Errorf("no token: %d, want 401", status)
	}
	if status, _ := openAPIDoc(t, g, gateway.OpenAPIOptions{}, "t-bad"); status != 401 {
		t.Errorf("a wrong token: %d, want 401", status)
	}
	_, doc := openAPIDoc(t, g, gateway.OpenAPIOptions{}, "t-good")
	if s := compactJSON(t, at(doc, "security")); s != `[{"bearer":[]}]` {
		t.Errorf("security %s", s)
	}
	if s := compactJSON(t, at(doc, "components", "securitySchemes", "bearer")); !strings.Contains(s, `"scheme":"bearer"`) || !strings.Contains(s, `"type":"http"`) {
		t.Errorf("the bearer scheme: %s", s)
	}
	params := compactJSON(t, at(doc, "paths", "/rpc/Math/Sum", "post", "parameters"))
	if !strings.Contains(params, "Rpcd-Auth-Method") {
		t.Errorf("parameters %s lack Rpcd-Auth-Method", params)
	}

	srv := httptest.NewServer(gateway.New(reg, gateway.Options{Prefix: "/api/"}).OpenAPI(gateway.OpenAPIOptions{}))
	defer srv.Close()
	for _, tc := range []struct {
		method string
		status int
		body   bool
	}{{http.MethodHead, 200, false}, {http.MethodPost, 405, true}} {
		req, _ := http.NewRequest(tc.method, srv.URL, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || (len(b) > 0) != tc.body {
			t.Errorf("%s: %d with %d bytes", tc.method, resp.StatusCode, len(b))
		}
	}
	if b := gateway.New(reg, gateway.Options{Prefix: "/api/"}).OpenAPIDocument(gateway.OpenAPIOptions{}); !strings.Contains(string(b), `"/api/Math/Sum"`) {
		t.Error("the document ignores the gateway's Prefix")
	}
	// A registry with no routes: a document all the same, JSON-RPC's
	// method without an (empty) enum.
	var empty map[string]any
	if err := json.Unmarshal(gateway.New(handler.NewRegistry(), gateway.Options{}).OpenAPIDocument(gateway.OpenAPIOptions{JSONRPCPath: "/jsonrpc"}), &empty); err != nil {
		t.Fatal(err)
	}
	if m := at(empty, "components", "schemas", "rpcd.JSONRPCRequest", "properties", "method"); m == nil || at(m, "enum") != nil || len(at(empty, "paths").(map[string]any)) != 1 {
		t.Errorf("no routes: paths %v, method %v", at(empty, "paths"), m)
	}
}
