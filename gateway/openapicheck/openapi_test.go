package openapicheck_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/rpcd/rpcd/auth"
	"github.com/rpcd/rpcd/gateway"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
)

// tree is a recursive argument and reply: its schema goes to the
// document's components.
type tree struct {
	Value int    `json:"value"`
	Kids  []tree `json:"kids,omitempty"`
	Next  *tree  `json:"next"`
}

// mixed is a reply with a value of each sort the schemas have a format
// or an encoding for.
type mixed struct {
	When  time.Time         `json:"when"`
	Data  []byte            `json:"data"`
	Small uint8             `json:"small"`
	Map   map[string]string `json:"map"`
	Ptr   *int              `json:"ptr"`
	Any   any               `json:"any,omitempty"`
	Pair  [2]float32        `json:"pair"`
}

// register adds the built-in routes and the test's to reg.
func register(reg *handler.Registry) {
	builtin.Register(reg)
	builtin.HandleStats(reg, nil)
	reg.Handle("Test/Tree", handler.Func(func(_ context.Context, in tree) (tree, error) { return in, nil }))
	reg.Handle("Test/Mixed", handler.Func(func(context.Context, struct{}) (mixed, error) {
		return mixed{When: time.Now(), Data: []byte{0, 1, 255}, Small: 200, Map: map[string]string{"k": "v"}, Any: []any{1, "x"}, Pair: [2]float32{1.5, -2}}, nil
	}))
	// Test/Fail fails with the code it is given.
	reg.Handle("Test/Fail", handler.Func(func(_ context.Context, in struct {
		Code int `json:"code"`
	}) (struct{}, error) {
		return struct{}{}, &handler.Error{Code: proto.Code(in.Code), Message: "as asked"}
	}))
	reg.HandleFunc("Test/Panic", func(context.Context, []byte, []byte) ([]byte, error) { panic("as asked") })
	reg.Handle("Test/Slow", handler.Func(func(ctx context.Context, _ struct{}) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	}), handler.Blocking())
}

// fixture is a gateway serving the test's routes over HTTP, as `rpcd serve
// -gateway` mounts it, and a validator built from the document it serves.
type fixture struct {
	url string
	gw  *gateway.Gateway
	doc []byte
	v   validator.Validator
	m   *v3.Document
}

var tokens = auth.Tokens{
	"t-admin":  {Subject: "alice", Roles: []string{"admin"}},
	"t-reader": {Subject: "bob", Roles: []string{"reader"}},
}

// start serves a gateway, with tokens if authn, and builds a validator
// from the document it serves, checking the document first.
func start(t *testing.T, authn bool) *fixture {
	t.Helper()
	reg := handler.NewRegistry()
	opts := gateway.Options{Limits: proto.Limits{MaxFrameSize: 64 << 10, MaxMetadata: 1 << 10}, CompressMin: -1,
		Logger: slog.New(slog.DiscardHandler)} // the panic's stack, the refused tokens
	if authn {
		opts.Authenticator = tokens
		reg.Use(auth.Require(auth.Roles(map[string][]string{builtin.Sum: {"admin"}})))
	}
	register(reg)
	gw := gateway.New(reg, opts)
	mux := http.NewServeMux()
	mux.Handle(gateway.JSONRPCPath, gw.JSONRPC())
	mux.Handle(gateway.OpenAPIPath, gw.OpenAPI(gateway.OpenAPIOptions{JSONRPCPath: gateway.JSONRPCPath}))
	mux.Handle("/", gw)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f := &fixture{url: srv.URL, gw: gw}

	req, _ := http.NewRequest(http.MethodGet, srv.URL+gateway.OpenAPIPath, nil)
	if authn {
		req.Header.Set("Authorization", "Bearer t-reader")
	}
	resp, body := do(t, req)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %d %s: %s", gateway.OpenAPIPath, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	f.doc = body
	doc, err := libopenapi.NewDocument(body)
	if err != nil {
		t.Fatalf("libopenapi does not read the document: %v", err)
	}
	if v := doc.GetVersion(); v != "3.1.0" {
		t.Fatalf("document version %q, want 3.1.0", v)
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		t.Fatalf("the document does not build (a $ref that does not resolve?): %v", err)
	}
	f.m = &model.Model
	v, errs := validator.NewValidator(doc, config.WithFormatAssertions(), config.WithContentAssertions())
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		t.Fatalf("the document is not valid OpenAPI 3.1:\n%s", describe(verrs))
	}
	f.v = v
	return f
}

// do sends req and returns the response with its body read.
func do(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func describe(errs []*verrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "  %s: %s\n", e.Message, e.Reason)
		for _, s := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "    %s at %s (%s)\n", s.Reason, s.FieldPath, s.KeywordLocation)
		}
	}
	return b.String()
}

// exchange is one request to the gateway and the status it must answer.
type exchange struct {
	name   string
	path   string
	ctype  string // default application/json
	body   string
	header map[string]string
	status int
	// documented: the request itself is one the document describes,
	// so the validator must find it valid too.
	documented bool
}

func (x exchange) request(t *testing.T, base string) *http.Request {
	req, err := http.NewRequest(http.MethodPost, base+x.path, strings.NewReader(x.body))
	if err != nil {
		t.Fatal(err)
	}
	ctype := x.ctype
	if ctype == "" {
		ctype = "application/json"
	}
	req.Header.Set("Content-Type", ctype)
	for k, v := range x.header {
		req.Header.Set(k, v)
	}
	return req
}

// check sends x to f's gateway, checks the status, and validates the
// response (and, if documented, the request) against the document.
func (f *fixture) check(t *testing.T, x exchange) []byte {
	t.Helper()
	resp, body := do(t, x.request(t, f.url))
	if resp.StatusCode != x.status {
		t.Errorf("%s: status %d, want %d; body %s", x.name, resp.StatusCode, x.status, body)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if ok, errs := f.v.ValidateHttpResponse(x.request(t, f.url), resp); !ok {
		t.Errorf("%s: the %d response does not match the document: %s\n%s", x.name, resp.StatusCode, body, describe(errs))
	}
	if x.documented {
		if ok, errs := f.v.ValidateHttpRequest(x.request(t, f.url)); !ok {
			t.Errorf("%s: the request does not match the document:\n%s", x.name, describe(errs))
		}
	}
	return body
}

// TestGatewayResponsesMatchDocument checks the document with the
// validator, then makes real requests, a success of each sort of route
// and each error status the gateway can be led to, and validates every
// response against the document.
func TestGatewayResponsesMatchDocument(t *testing.T) {
	f := start(t, false)
	big := strings.Repeat("x", 70<<10)
	for _, x := range []exchange{
		{name: "typed", path: "/rpc/Math/Sum", body: `{"a":1,"b":2}`, status: 200, documented: true},
		{name: "typed, no body", path: "/rpc/Math/Sum", status: 200, documented: true},
		{name: "typed string", path: "/rpc/Bench/EchoString", body: `"hi"`, status: 200, documented: true},
		{name: "typed object", path: "/rpc/Bench/MultiArgs", body: `{"i32":1,"i64":2,"b":true,"f64":0.5,"s":"abc"}`, status: 200, documented: true},
		{name: "route list", path: "/rpc/Sys/Routes", status: 200, documented: true},
		{name: "descriptions", path: "/rpc/Sys/Describe", status: 200, documented: true},
		{name: "one description", path: "/rpc/Sys/Describe", body: `"Test/Tree"`, status: 200, documented: true},
		{name: "stats", path: "/rpc/Sys/Stats", status: 200, documented: true},
		{name: "recursive", path: "/rpc/Test/Tree", body: `{"value":1,"kids":[{"value":2,"next":{"value":3}}]}`, status: 200, documented: true},
		{name: "formats", path: "/rpc/Test/Mixed", body: `{}`, status: 200, documented: true},
		{name: "raw", path: "/rpc/Bench/EchoPacket", ctype: "application/octet-stream", body: "\x00\x01bytes", status: 200, documented: true},
		{name: "raw with JSON", path: "/rpc/Sys/Ping", body: `{}`, status: 200, documented: true},
		{name: "traced", path: "/rpc/Math/Sum", body: `{"a":1}`, status: 200, documented: true, header: map[string]string{
			"Rpcd-Timeout": "5s", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "baggage": "tenant=acme", "Rpcd-Meta-Tenant": "acme"}},

		{name: "argument that does not decode", path: "/rpc/Math/Sum", body: `{"a":"x"}`, status: 400},
		{name: "bad Rpcd-Timeout", path: "/rpc/Math/Sum", body: `{}`, header: map[string]string{"Rpcd-Timeout": "soon"}, status: 400},
		{name: "OutOfRange", path: "/rpc/Math/Sum", body: `{"a":9000000000000000000,"b":900000000000000000}`, status: 400, documented: true},
		{name: "handler's NotFound", path: "/rpc/Test/Fail", body: `{"code":5}`, status: 404, documented: true},
		{name: "AlreadyExists", path: "/rpc/Test/Fail", body: `{"code":6}`, status: 409, documented: true},
		{name: "PermissionDenied", path: "/rpc/Test/Fail", body: `{"code":7}`, status: 403, documented: true},
		{name: "body too large", path: "/rpc/Bench/EchoString", body: `"` + big + `"`, status: 413, documented: true},
		{name: "content type", path: "/rpc/Math/Sum", ctype: "text/plain", body: `{}`, status: 415},
		{name: "ResourceExhausted", path: "/rpc/Test/Fail", body: `{"code":8}`, status: 429, documented: true},
		{name: "metadata too large", path: "/rpc/Math/Sum", body: `{}`, header: map[string]string{"Rpcd-Meta-Big": strings.Repeat("m", 2<<10)}, status: 431},
		{name: "Canceled", path: "/rpc/Test/Fail", body: `{"code":1}`, status: 499, documented: true},
		{name: "panic", path: "/rpc/Test/Panic", status: 500, documented: true},
		{name: "unknown code", path: "/rpc/Test/Fail", body: `{"code":99}`, status: 500, documented: true},
		{name: "Unimplemented", path: "/rpc/Test/Fail", body: `{"code":12}`, status: 501, documented: true},
		{name: "Unavailable", path: "/rpc/Test/Fail", body: `{"code":14}`, status: 503, documented: true},
		{name: "deadline", path: "/rpc/Test/Slow", header: map[string]string{"Rpcd-Timeout": "20ms"}, status: 504, documented: true},
		{name: "Unauthenticated from a handler", path: "/rpc/Test/Fail", body: `{"code":16}`, status: 401, documented: true},

		{name: "JSON-RPC", path: gateway.JSONRPCPath, body: `{"jsonrpc":"2.0","method":"Math/Sum","params":{"a":1,"b":2},"id":1}`, status: 200, documented: true},
		{name: "JSON-RPC batch", path: gateway.JSONRPCPath, body: `[{"jsonrpc":"2.0","method":"Math/Sum","params":[{"a":1}],"id":"x"},{"jsonrpc":"2.0","method":"Test/Fail","params":{"code":7},"id":2}]`, status: 200, documented: true},
		{name: "JSON-RPC notification", path: gateway.JSONRPCPath, body: `{"jsonrpc":"2.0","method":"Sys/Ping"}`, status: 204, documented: true},
		{name: "JSON-RPC content type", path: gateway.JSONRPCPath, ctype: "text/plain", body: `{}`, status: 415},
		{name: "JSON-RPC body too large", path: gateway.JSONRPCPath, body: `{"jsonrpc":"2.0","method":"Bench/EchoString","params":["` + big + `"],"id":1}`, status: 413, documented: true},
	} {
		f.check(t, x)
	}

	// A route the server has not, so the document has no path for it:
	// its 404 body is still the document's error body.
	resp, body := do(t, exchange{path: "/rpc/No/Such", body: "{}"}.request(t, f.url))
	errSchema := f.m.Components.Schemas.GetOrZero("rpcd.Error")
	if resp.StatusCode != 404 || errSchema == nil {
		t.Fatalf("No/Such: %d %s; the document's rpcd.Error: %v", resp.StatusCode, body, errSchema)
	}
	if ok, errs := schema_validation.NewSchemaValidator().ValidateSchemaBytes(errSchema.Schema(), body); !ok {
		t.Errorf("No/Such: the 404 body %s is not the document's error body:\n%s", body, describe(errs))
	}

	// Draining: 503 from the gateway itself, before any handler.
	f.gw.Drain()
	f.check(t, exchange{name: "draining", path: "/rpc/Math/Sum", body: `{}`, status: 503, documented: true})
}

// TestGatewayAuthMatchesDocument: with an Authenticator, the document has
// a bearer scheme every operation requires and is itself served only
// with credentials; 401 and 403 match it, and so does a success.
func TestGatewayAuthMatchesDocument(t *testing.T) {
	f := start(t, true)
	var doc struct {
		Security   []map[string][]string `json:"security"`
		Components struct {
			SecuritySchemes map[string]struct{ Type, Scheme string } `json:"securitySchemes"`
		} `json:"components"`
	}
	if err := json.Unmarshal(f.doc, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Security) != 1 || doc.Security[0]["bearer"] == nil || doc.Components.SecuritySchemes["bearer"].Scheme != "bearer" {
		t.Errorf("security %v, schemes %v; want a bearer scheme required", doc.Security, doc.Components.SecuritySchemes)
	}
	for _, x := range []exchange{
		{name: "no token", path: "/rpc/Sys/Ping", status: 401},
		{name: "wrong token", path: "/rpc/Sys/Ping", header: map[string]string{"Authorization": "Bearer t-nobody"}, status: 401},
		{name: "no role", path: "/rpc/Math/Sum", body: `{"a":1}`, header: map[string]string{"Authorization": "Bearer t-reader"}, status: 403, documented: true},
		{name: "admin", path: "/rpc/Math/Sum", body: `{"a":1}`, header: map[string]string{"Authorization": "Bearer t-admin", "Rpcd-Auth-Method": "token"}, status: 200, documented: true},
		{name: "JSON-RPC without a token", path: gateway.JSONRPCPath, body: `{"jsonrpc":"2.0","method":"Sys/Ping","id":1}`, status: 401},
	} {
		f.check(t, x)
	}
	req, _ := http.NewRequest(http.MethodGet, f.url+gateway.OpenAPIPath, nil)
	if resp, body := do(t, req); resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("the document without credentials: %d %s, want 401 with WWW-Authenticate", resp.StatusCode, body)
	}
}

// TestValidatorRefuses: the validator, given this document, refuses
// responses and requests that break it, so that the checks above are not
// passed by a validator that passes everything.
func TestValidatorRefuses(t *testing.T) {
	f := start(t, false)
	for _, tc := range []struct {
		name, path, reqBody string
		status              int
		body                string
	}{
		{"a string for an int64", "/rpc/Math/Sum", `{}`, 200, `"three"`},
		{"an error body without code", "/rpc/Math/Sum", `{}`, 404, `{"message":"no"}`},
		{"an error code that is no name", "/rpc/Math/Sum", `{}`, 400, `{"code":"not a name","message":"x"}`},
		{"a route list of strings", "/rpc/Sys/Routes", ``, 200, `["Math/Sum"]`},
		{"a required field missing", "/rpc/Sys/Routes", ``, 200, `[{"blocking":true}]`},
		{"deep in a recursive type", "/rpc/Test/Tree", `{}`, 200, `{"value":1,"next":{"value":"two","next":null}}`},
		{"a date that is not one", "/rpc/Test/Mixed", `{}`, 200, `{"when":"yesterday","data":null,"small":1,"map":null,"ptr":null,"pair":[1,2]}`},
		{"a uint8 past 255", "/rpc/Test/Mixed", `{}`, 200, `{"when":"2026-01-02T03:04:05Z","data":null,"small":256,"map":null,"ptr":null,"pair":[1,2]}`},
		{"an array of the wrong length", "/rpc/Test/Mixed", `{}`, 200, `{"when":"2026-01-02T03:04:05Z","data":null,"small":1,"map":null,"ptr":null,"pair":[1]}`},
		{"a JSON-RPC response without id", gateway.JSONRPCPath, `{"jsonrpc":"2.0","method":"Sys/Ping","id":1}`, 200, `{"jsonrpc":"2.0","result":1}`},
		{"a status the gateway never gives", "/rpc/Math/Sum", `{}`, 418, `{"code":"Teapot","message":"x"}`},
	} {
		req := exchange{path: tc.path, body: tc.reqBody}.request(t, f.url)
		resp := &http.Response{StatusCode: tc.status, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(tc.body)), Request: req}
		if ok, _ := f.v.ValidateHttpResponse(req, resp); ok {
			t.Errorf("%s: the validator passed %d %s", tc.name, tc.status, tc.body)
		}
	}
	for _, tc := range []struct{ name, path, body string }{
		{"an argument of the wrong type", "/rpc/Math/Sum", `{"a":"x"}`},
		{"a method the server has not", gateway.JSONRPCPath, `{"jsonrpc":"2.0","method":"No/Such","id":1}`},
		{"a JSON-RPC version that is not 2.0", gateway.JSONRPCPath, `{"jsonrpc":"1.0","method":"Sys/Ping","id":1}`},
	} {
		if ok, _ := f.v.ValidateHttpRequest(exchange{path: tc.path, body: tc.body}.request(t, f.url)); ok {
			t.Errorf("%s: the validator passed the request %s", tc.name, tc.body)
		}
	}
}
