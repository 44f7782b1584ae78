package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpcd/rpcd/auth"
	"github.com/rpcd/rpcd/gateway"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/internal/leaktest"
	"github.com/rpcd/rpcd/proto"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// waitLimit bounds every wait of these tests.
const waitLimit = 10 * time.Second

type sumArgs struct {
	A, B int
}

type failArgs struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// testRegistry has the routes the tests call.
func testRegistry(t *testing.T) *handler.Registry {
	reg := handler.NewRegistry()
	reg.Handle("Math/Sum", handler.Func(func(_ context.Context, in sumArgs) (int, error) { return in.A + in.B, nil }))
	reg.Handle("Test/Echo", handler.Func(func(_ context.Context, in map[string]any) (map[string]any, error) { return in, nil }))
	reg.HandleFunc("Bytes/Echo", func(_ context.Context, req, reply []byte) ([]byte, error) { return append(reply, req...), nil })
	reg.Handle("Test/Fail", handler.Func(func(_ context.Context, in failArgs) (int, error) {
		switch in.Code {
		case -1:
			return 0, errors.New("no code at all")
		case -2:
			panic("on purpose")
		}
		return 0, &handler.Error{Code: proto.Code(in.Code), Message: in.Message}
	}))
	reg.Handle("Test/Call", handler.Func(func(ctx context.Context, _ struct{}) (map[string]any, error) {
		c := handler.CallFrom(ctx)
		md := map[string][]string{}
		c.Metadata.Range(func(k, v []byte) bool {
			md[string(k)] = append(md[string(k)], string(v))
			return true
		})
		out := map[string]any{"route": c.Route, "codec": c.Codec.String(), "metadata": md, "remote": c.Remote.String()}
		if dl, ok := ctx.Deadline(); ok {
			out["deadline_ms"] = time.Until(dl).Milliseconds()
		}
		if c.Identity != nil {
			out["subject"] = c.Identity.Subject
		}
		return out, nil
	}))
	reg.HandleFunc("Test/Big", func(_ context.Context, req, reply []byte) ([]byte, error) {
		n, _ := strconv.Atoi(string(req))
		return append(reply, bytes.Repeat([]byte("x"), n)...), nil
	})
	return reg
}

// serve runs g on a loopback HTTP server for the test.
func serve(t *testing.T, g http.Handler) (url string, c *http.Client) {
	srv := httptest.NewServer(g)
	c = &http.Client{Timeout: waitLimit, Transport: &http.Transport{}}
	t.Cleanup(func() {
		c.CloseIdleConnections()
		srv.Close()
	})
	return srv.URL, c
}

// post sends body to route with the headers (pairs) and returns the
// status and body.
func post(t *testing.T, c *http.Client, url, route, contentType, body string, headers ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/rpc/"+route, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// decodeError decodes a JSON error body.
func decodeError(t *testing.T, body string) (code, message string, unprocessed bool) {
	t.Helper()
	var e struct {
		Code        string `json:"code"`
		Message     string `json:"message"`
		Unprocessed bool   `json:"unprocessed"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q is not JSON: %v", body, err)
	}
	return e.Code, e.Message, e.Unprocessed
}

// TestStatusTable pins every code's HTTP status and name (the table in
// docs/gateway.md).
func TestStatusTable(t *testing.T) {
	want := []struct {
		code   proto.Code
		name   string
		status int
	}{
		{proto.CodeOK, "OK", 200},
		{proto.CodeCanceled, "Canceled", 499},
		{proto.CodeUnknown, "Unknown", 500},
		{proto.CodeInvalidArgument, "InvalidArgument", 400},
		{proto.CodeDeadlineExceeded, "DeadlineExceeded", 504},
		{proto.CodeNotFound, "NotFound", 404},
		{proto.CodeAlreadyExists, "AlreadyExists", 409},
		{proto.CodePermissionDenied, "PermissionDenied", 403},
		{proto.CodeResourceExhausted, "ResourceExhausted", 429},
		{proto.CodeFailedPrecondition, "FailedPrecondition", 400},
		{proto.CodeAborted, "Aborted", 409},
		{proto.CodeOutOfRange, "OutOfRange", 400},
		{proto.CodeUnimplemented, "Unimplemented", 501},
		{proto.CodeInternal, "Internal", 500},
		{proto.CodeUnavailable, "Unavailable", 503},
		{proto.CodeDataLoss, "DataLoss", 500},
		{proto.CodeUnauthenticated, "Unauthenticated", 401},
		{proto.Code(17), "Code(17)", 500},
		{proto.Code(999), "Code(999)", 500},
	}
	for _, w := range want {
		if got := gateway.HTTPStatus(w.code); got != w.status {
			t.Errorf("HTTPStatus(%d) = %d, want %d", w.code, got, w.status)
		}
		if got := gateway.CodeName(w.code); got != w.name {
			t.Errorf("CodeName(%d) = %q, want %q", w.code, got, w.name)
		}
	}
}

// TestErrorStatuses calls a route that fails with each code over HTTP and
// checks the status and the JSON body.
func TestErrorStatuses(t *testing.T) {
	url, c := serve(t, gateway.New(testRegistry(t), gateway.Options{}))
	for code := proto.CodeCanceled; code <= proto.CodeUnauthenticated; code++ {
		t.Run(code.String(), func(t *testing.T) {
			status, h, body := post(t, c, url, "Test/Fail", gateway.ContentJSON, `{"code":`+strconv.Itoa(int(code))+`,"message":"it failed"}`)
			if want := gateway.HTTPStatus(code); status != want {
				t.Errorf("status %d, want %d", status, want)
			}
			if ct := h.Get("Content-Type"); ct != gateway.ContentJSON {
				t.Errorf("Content-Type %q", ct)
			}
			name, msg, _ := decodeError(t, body)
			if name != gateway.CodeName(code) || msg != "it failed" {
				t.Errorf("body %s, want code %s and message \"it failed\"", body, gateway.CodeName(code))
			}
		})
	}
	cases := []struct {
		name, body string
		status     int
		code, msg  string
	}{
		{"unknown code number", `{"code":77,"message":"odd"}`, 500, "Code(77)", "odd"},
		{"error without code", `{"code":-1}`, 500, "Unknown", "no code at all"},
		{"panic", `{"code":-2}`, 500, "Internal", "handler for Test/Fail panicked: on purpose"},
		// The handler's words, not the JSON decoder's, and no dump of the body.
		{"argument that does not decode", `{"code":"seven"}`, 400, "InvalidArgument", `Test/Fail: argument: field "code": want a number, got a string at byte 9`},
		{"body that is not JSON", `{"code":`, 400, "InvalidArgument", "Test/Fail: argument: not valid JSON: it ends at byte 8, before the value is complete"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := post(t, c, url, "Test/Fail", gateway.ContentJSON, tc.body)
			name, msg, _ := decodeError(t, body)
			if status != tc.status || name != tc.code || msg != tc.msg {
				t.Errorf("got %d %s, want %d with code %s and the message %q", status, body, tc.status, tc.code, tc.msg)
			}
		})
	}
}

// TestRequestErrors checks the answers to requests no handler sees.
func TestRequestErrors(t *testing.T) {
	url, c := serve(t, gateway.New(testRegistry(t), gateway.Options{}))
	cases := []struct {
		name, method, path, contentType string
		status                          int
		code                            string
	}{
		{"no such route", "POST", "/rpc/No/Such", gateway.ContentJSON, 404, "NotFound"},
		{"empty route", "POST", "/rpc/", gateway.ContentJSON, 404, "NotFound"},
		{"outside the prefix", "POST", "/other/Math/Sum", gateway.ContentJSON, 404, "NotFound"},
		{"GET", "GET", "/rpc/Math/Sum", "", 405, "Unimplemented"},
		{"form body", "POST", "/rpc/Math/Sum", "application/x-www-form-urlencoded", 415, "InvalidArgument"},
		{"text body", "POST", "/rpc/Math/Sum", "text/plain", 415, "InvalidArgument"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, url+tc.path, strings.NewReader(`{"a":1,"b":2}`))
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			name, _, unprocessed := decodeError(t, string(b))
			if resp.StatusCode != tc.status || name != tc.code || !unprocessed {
				t.Errorf("got %d %s, want %d with code %s, unprocessed", resp.StatusCode, b, tc.status, tc.code)
			}
			if tc.method == "GET" && resp.Header.Get("Allow") != "POST" {
				t.Errorf("Allow %q, want POST", resp.Header.Get("Allow"))
			}
		})
	}
}

// TestJSONRoundTrip sends JSON values through a typed route and back.
func TestJSONRoundTrip(t *testing.T) {
	url, c := serve(t, gateway.New(testRegistry(t), gateway.Options{}))
	status, h, body := post(t, c, url, "Math/Sum", "", `{"a":40,"b":2}`) // no Content-Type: JSON
	if status != 200 || body != "42" || h.Get("Content-Type") != gateway.ContentJSON {
		t.Fatalf("Math/Sum: %d %q (Content-Type %q), want 200 42", status, body, h.Get("Content-Type"))
	}
	in := map[string]any{"s": "héllo \u2028 \"q\"", "n": 1.5, "list": []any{true, nil, "x"}, "obj": map[string]any{"k": "v"}}
	b, _ := json.Marshal(in)
	status, _, body = post(t, c, url, "Test/Echo", "application/json; charset=utf-8", string(b))
	if status != 200 {
		t.Fatalf("Test/Echo: %d %s", status, body)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("reply %q: %v", body, err)
	}
	want, _ := json.Marshal(in)
	got, _ := json.Marshal(out)
	if !bytes.Equal(got, want) {
		t.Errorf("round trip: got %s, want %s", got, want)
	}
}

// TestRawRoute calls a raw route with an octet-stream body.
func TestRawRoute(t *testing.T) {
	url, c := serve(t, gateway.New(testRegistry(t), gateway.Options{}))
	payload := string([]byte{0, 1, 2, 0xff, 0xfe, '\n', 'x'})
	status, h, body := post(t, c, url, "Bytes/Echo", gateway.ContentRaw, payload)
	if status != 200 || body != payload || h.Get("Content-Type") != gateway.ContentRaw {
		t.Fatalf("Bytes/Echo: %d %q (Content-Type %q), want 200 and the bytes sent", status, body, h.Get("Content-Type"))
	}
	status, _, body = post(t, c, url, "Test/Call", gateway.ContentRaw, "")
	if status != 400 || !strings.Contains(body, "takes json, not raw") {
		t.Errorf("a typed route called raw: %d %s, want 400 InvalidArgument", status, body)
	}
}

// TestMetadata checks that traceparent, tracestate and Rpcd-Meta-*
// headers reach the handler as metadata, and the limits on them.
func TestMetadata(t *testing.T) {
	g := gateway.New(testRegistry(t), gateway.Options{Limits: proto.Limits{MaxMetadata: 256}})
	url, c := serve(t, g)
	tp := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	status, _, body := post(t, c, url, "Test/Call", gateway.ContentJSON, "{}",
		"traceparent", tp, "tracestate", "rojo=00f067aa0ba902b7",
		"baggage", "tenant=acme,region=eu", "Baggage", "user=u1;p=1",
		"Rpcd-Meta-Tenant", "acme", "rpcd-meta-request-id", "r1", "Rpcd-Meta-Tenant", "second",
		"X-Other", "not metadata")
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var got struct {
		Route    string
		Codec    string
		Remote   string
		Metadata map[string][]string
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"traceparent": {tp}, "tracestate": {"rojo=00f067aa0ba902b7"},
		"baggage": {"tenant=acme,region=eu,user=u1;p=1"}, // repeated headers: one entry
		"tenant":  {"acme", "second"}, "request-id": {"r1"},
	}
	gotJSON, _ := json.Marshal(got.Metadata)
	wantJSON, _ := json.Marshal(want)
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Errorf("metadata %s, want %s", gotJSON, wantJSON)
	}
	if got.Route != "Test/Call" || got.Codec != "json" || !strings.HasPrefix(got.Remote, "127.0.0.1:") {
		t.Errorf("call %+v", got)
	}

	status, _, body = post(t, c, url, "Test/Call", gateway.ContentJSON, "{}", "Rpcd-Meta-Rpcd-Auth-Method", "x")
	if code, _, _ := decodeError(t, body); status != 400 || code != "InvalidArgument" {
		t.Errorf("reserved key: %d %s, want 400 InvalidArgument", status, body)
	}
	status, _, body = post(t, c, url, "Test/Call", gateway.ContentJSON, "{}", "Rpcd-Meta-Big", strings.Repeat("v", 300))
	if code, _, _ := decodeError(t, body); status != 431 || code != "ResourceExhausted" {
		t.Errorf("metadata over the limit: %d %s, want 431 ResourceExhausted", status, body)
	}
}

// TestDeadline checks the Rpcd-Timeout header and that a call whose
// client goes away is cancelled.
func TestDeadline(t *testing.T) {
	reg := testRegistry(t)
	entered := make(chan struct{}, 1)
	ended := make(chan error, 1)
	reg.Handle("Test/Wait", handler.Func(func(ctx context.Context, _ struct{}) (int, error) {
		entered <- struct{}{}
		select {
		case <-ctx.Done():
			ended <- ctx.Err()
			return 0, ctx.Err()
		case <-time.After(waitLimit):
			ended <- nil
			return 1, nil
		}
	}))
	url, c := serve(t, gateway.New(reg, gateway.Options{}))

	status, _, body := post(t, c, url, "Test/Call", gateway.ContentJSON, "{}", "Rpcd-Timeout", "3s")
	var got struct {
		DeadlineMS *int64 `json:"deadline_ms"`
	}
	_ = json.Unmarshal([]byte(body), &got)
	if status != 200 || got.DeadlineMS == nil || *got.DeadlineMS <= 0 || *got.DeadlineMS > 3000 {
		t.Errorf("deadline seen by the handler: %d %s, want one within 3s", status, body)
	}

	status, _, body = post(t, c, url, "Test/Wait", gateway.ContentJSON, "{}", "Rpcd-Timeout", "50ms")
	<-entered
	if code, _, _ := decodeError(t, body); status != 504 || code != "DeadlineExceeded" {
		t.Errorf("deadline passed: %d %s, want 504 DeadlineExceeded", status, body)
	}
	if err := <-ended; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("handler's context ended with %v", err)
	}

	for _, bad := range []string{"soon", "-1s", "0"} {
		status, _, body = post(t, c, url, "Test/Call", gateway.ContentJSON, "{}", "Rpcd-Timeout", bad)
		if code, _, _ := decodeError(t, body); status != 400 || code != "InvalidArgument" {
			t.Errorf("Rpcd-Timeout %q: %d %s, want 400", bad, status, body)
		}
	}

	// The client goes away: the handler's context is cancelled.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/rpc/Test/Wait", strings.NewReader("{}"))
	errc := make(chan error, 1)
	go func() {
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	select {
	case <-entered:
	case <-time.After(waitLimit):
		t.Fatal("the handler did not start")
	}
	cancel()
	if err := <-errc; err == nil {
		t.Error("the cancelled request succeeded")
	}
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("handler's context ended with %v, want Canceled", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("the handler was not cancelled when its client went away")
	}
}

// TestAuth checks that a gateway with an Authenticator requires a bearer
// token, passes the identity to the call, and that the registry's
// authorization middleware applies.
func TestAuth(t *testing.T) {
	reg := testRegistry(t)
	reg.Use(auth.Require(auth.Roles(map[string][]string{"Math/Sum": {"admin"}})))
	tokens := auth.Tokens{
		"t-admin": {Subject: "alice", Roles: []string{"admin"}},
		"t-user":  {Subject: "bob"},
	}
	url, c := serve(t, gateway.New(reg, gateway.Options{Authenticator: tokens}))
	cases := []struct {
		name, route string
		headers     []string
		status      int
		code        string
	}{
		{"no credentials", "Test/Call", nil, 401, "Unauthenticated"},
		{"not bearer", "Test/Call", []string{"Authorization", "Basic dDp0"}, 401, "Unauthenticated"},
		{"wrong token", "Test/Call", []string{"Authorization", "Bearer nope"}, 401, "Unauthenticated"},
		{"wrong method", "Test/Call", []string{"Authorization", "Bearer t-user", gateway.HeaderAuthMethod, "hmac"}, 401, "Unauthenticated"},
		{"user", "Test/Call", []string{"Authorization", "Bearer t-user"}, 200, ""},
		{"user without the role", "Math/Sum", []string{"Authorization", "Bearer t-user"}, 403, "PermissionDenied"},
		{"admin", "Math/Sum", []string{"Authorization", "bearer t-admin", gateway.HeaderAuthMethod, "token"}, 200, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := post(t, c, url, tc.route, gateway.ContentJSON, `{"a":1,"b":2}`, tc.headers...)
			if status != tc.status {
				t.Fatalf("status %d %s, want %d", status, body, tc.status)
			}
			if tc.code != "" {
				if code, _, _ := decodeError(t, body); code != tc.code {
					t.Errorf("code %s, want %s", code, tc.code)
				}
			}
			if status == 401 && h.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
	_, _, body := post(t, c, url, "Test/Call", gateway.ContentJSON, "{}", "Authorization", "Bearer t-user")
	if !strings.Contains(body, `"subject":"bob"`) {
		t.Errorf("the handler did not see the identity: %s", body)
	}
}

// TestBodyLimit checks that bodies and replies are bounded by the frame
// limit, with a known length or chunked.
func TestBodyLimit(t *testing.T) {
	const frame = 1024
	url, c := serve(t, gateway.New(testRegistry(t), gateway.Options{Limits: proto.Limits{MaxFrameSize: frame}}))
	room := frame - proto.HeaderSize - len("Bytes/Echo")
	status, _, body := post(t, c, url, "Bytes/Echo", gateway.ContentRaw, strings.Repeat("a", room))
	if status != 200 || len(body) != room {
		t.Errorf("a body that fits: %d, %d bytes back", status, len(body))
	}
	status, _, body = post(t, c, url, "Bytes/Echo", gateway.ContentRaw, strings.Repeat("a", room+1))
	if code, _, _ := decodeError(t, body); status != 413 || code != "ResourceExhausted" {
		t.Errorf("a body one byte over: %d %s, want 413 ResourceExhausted", status, body)
	}
	// Chunked: no Content-Length, the limit is found while reading.
	req, _ := http.NewRequest(http.MethodPost, url+"/rpc/Bytes/Echo", io.MultiReader(strings.NewReader(strings.Repeat("b", 600)), strings.NewReader(strings.Repeat("b", 600))))
	req.Header.Set("Content-Type", gateway.ContentRaw)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if code, _, _ := decodeError(t, string(b)); resp.StatusCode != 413 || code != "ResourceExhausted" || req.ContentLength != 0 {
		t.Errorf("a chunked body over the limit: %d %s, want 413 ResourceExhausted", resp.StatusCode, b)
	}
	// A reply over the frame limit.
	status, _, body = post(t, c, url, "Test/Big", gateway.ContentRaw, strconv.Itoa(frame))
	if code, _, _ := decodeError(t, body); status != 429 || code != "ResourceExhausted" {
		t.Errorf("a reply over the limit: %d %s, want 429 ResourceExhausted", status, body)
	}
}

// TestSameRegistry checks that a call through the gateway runs the
// registry's middleware, registered before or after the gateway was made,
// and sees routes registered later.
func TestSameRegistry(t *testing.T) {
	reg := testRegistry(t)
	g := gateway.New(reg, gateway.Options{})
	var seen atomic.Int64
	reg.Use(func(next handler.Handler) handler.Handler {
		return handler.HandlerFunc(func(ctx context.Context, req, reply []byte) ([]byte, error) {
			seen.Add(1)
			return next.ServeRPC(ctx, req, reply)
		})
	})
	reg.Handle("Late/Route", handler.Func(func(context.Context, struct{}) (string, error) { return "late", nil }))
	url, c := serve(t, g)
	if status, _, body := post(t, c, url, "Late/Route", "", ""); status != 200 || body != `"late"` {
		t.Errorf("a route registered after New: %d %s", status, body)
	}
	post(t, c, url, "Math/Sum", "", `{"a":1}`)
	if n := seen.Load(); n != 2 {
		t.Errorf("middleware ran %d times for 2 calls", n)
	}
}

// TestDrain checks that a draining gateway refuses calls as unprocessed.
func TestDrain(t *testing.T) {
	g := gateway.New(testRegistry(t), gateway.Options{})
	url, c := serve(t, g)
	g.Drain()
	status, _, body := post(t, c, url, "Math/Sum", "", `{"a":1}`)
	if code, _, unprocessed := decodeError(t, body); status != 503 || code != "Unavailable" || !unprocessed {
		t.Errorf("draining: %d %s, want 503 Unavailable, unprocessed", status, body)
	}
}

// TestCurl runs the curl binary against a live gateway.
func TestCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not found (.ci/run installs it)")
	}
	url, _ := serve(t, gateway.New(testRegistry(t), gateway.Options{}))
	run := func(args ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		out, err := exec.CommandContext(ctx, curl, append([]string{"-sS", "-w", " %{http_code}"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("curl %q: %v\n%s", args, err, out)
		}
		return string(out)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-H", "Content-Type: application/json", "-d", `{"a":1,"b":2}`, url + "/rpc/Math/Sum"}, "3 200"},
		{[]string{"-H", "Content-Type: application/json", "-H", "traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "-d", "{}", url + "/rpc/Test/Call"}, `"traceparent":["00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"]`},
		{[]string{"-H", "Content-Type: application/octet-stream", "--data-binary", "raw bytes", url + "/rpc/Bytes/Echo"}, "raw bytes 200"},
		{[]string{"-H", "Content-Type: application/json", "-d", "{}", url + "/rpc/No/Such"}, `{"code":"NotFound","message":"no route No/Such","unprocessed":true}` + "\n 404"},
		{[]string{"-H", "Content-Type: application/json", "-d", `{"code":16,"message":"who?"}`, url + "/rpc/Test/Fail"}, `{"code":"Unauthenticated","message":"who?"}` + "\n 401"},
	}
	for _, tc := range cases {
		if got := run(tc.args...); !strings.Contains(got, tc.want) {
			t.Errorf("curl %q: got %q, want it to contain %q", tc.args, got, tc.want)
		}
	}
	// --compressed: curl asks for the codings it has (gzip always, zstd in
	// Debian's build), gets one, and expands it.
	raw := []string{"-H", "Content-Type: application/octet-stream", "--data-binary", "5000", url + "/rpc/Test/Big"}
	if got := run(append([]string{"--compressed"}, raw...)...); got != strings.Repeat("x", 5000)+" 200" {
		t.Errorf("curl --compressed: %d bytes, want 5000 x's and 200", len(got))
	}
	if hdr := strings.ToLower(run(append([]string{"--compressed", "-D", "-", "-o", "/dev/null"}, raw...)...)); !strings.Contains(hdr, "content-encoding: zstd") && !strings.Contains(hdr, "content-encoding: gzip") {
		t.Errorf("curl --compressed got no Content-Encoding:\n%s", hdr)
	}
}

// TestContentEncoding: a reply of CompressMin bytes or more goes in the
// coding the request's Accept-Encoding weighs highest of zstd and gzip (zstd
// on a tie), and as it is otherwise; a request body in Content-Encoding
// zstd or gzip is expanded before the route sees it, within the body's
// limit; another coding is refused with 415, a body that does not expand
// with 400, one that expands past the limit with 413.
func TestContentEncoding(t *testing.T) {
	url, c := serve(t, gateway.New(testRegistry(t), gateway.Options{Limits: proto.Limits{MaxFrameSize: 64 << 10}}))
	big := strings.Repeat("x", 5000)
	for _, tc := range []struct {
		accept, size string
		want         proto.Compression
	}{
		{"zstd", "5000", proto.CompressionZstd},
		{"gzip", "5000", proto.CompressionGzip},
		{"gzip, deflate, br, zstd", "5000", proto.CompressionZstd},
		{"gzip, zstd;q=0.5", "5000", proto.CompressionGzip},
		{"x-gzip", "5000", proto.CompressionGzip},
		{"*", "5000", proto.CompressionZstd},
		{"*, zstd;q=0", "5000", proto.CompressionGzip},
		{"zstd;q=0, gzip;q=0", "5000", proto.CompressionNone},
		{"identity", "5000", proto.CompressionNone},
		{"br", "5000", proto.CompressionNone},
		{"gzip", "100", proto.CompressionNone}, // under CompressMin
	} {
		status, h, body := post(t, c, url, "Test/Big", gateway.ContentRaw, tc.size, "Accept-Encoding", tc.accept)
		if status != http.StatusOK || h.Get("Vary") != "Accept-Encoding" {
			t.Fatalf("Accept-Encoding %q: %d, Vary %q", tc.accept, status, h.Get("Vary"))
		}
		got := []byte(body)
		if tc.want == proto.CompressionNone {
			if ce := h.Get("Content-Encoding"); ce != "" {
				t.Fatalf("Accept-Encoding %q: Content-Encoding %q, want none", tc.accept, ce)
			}
		} else {
			if ce := h.Get("Content-Encoding"); ce != tc.want.String() {
				t.Fatalf("Accept-Encoding %q: Content-Encoding %q, want %v", tc.accept, ce, tc.want)
			}
			var err error
			if got, err = compression.Expand(nil, got, tc.want, 1<<20); err != nil {
				t.Fatalf("Accept-Encoding %q: %v", tc.accept, err)
			}
		}
		if n, _ := strconv.Atoi(tc.size); string(got) != big[:n] {
			t.Fatalf("Accept-Encoding %q: %d bytes, want %s x's", tc.accept, len(got), tc.size)
		}
	}

	sum := []byte(`{"a":1,"b":2}`)
	for _, zip := range compression.Supported() {
		status, _, body := post(t, c, url, "Math/Sum", gateway.ContentJSON, string(compression.Append(nil, sum, zip)), "Content-Encoding", zip.String())
		if status != http.StatusOK || body != "3" {
			t.Fatalf("a body in %v: %d %q", zip, status, body)
		}
	}
	for _, tc := range []struct {
		encoding, body string
		status         int
		code           string
	}{
		{"br", "x", http.StatusUnsupportedMediaType, "InvalidArgument"},
		{"gzip, zstd", "x", http.StatusUnsupportedMediaType, "InvalidArgument"},
		{"gzip", "not gzip", http.StatusBadRequest, "InvalidArgument"},
		{"zstd", string(compression.Append(nil, make([]byte, 100<<10), proto.CompressionZstd)), http.StatusRequestEntityTooLarge, "ResourceExhausted"},
	} {
		status, h, body := post(t, c, url, "Bytes/Echo", gateway.ContentRaw, tc.body, "Content-Encoding", tc.encoding)
		var e struct{ Code string }
		_ = json.Unmarshal([]byte(body), &e)
		if status != tc.status || e.Code != tc.code {
			t.Fatalf("Content-Encoding %q: %d %q, want %d %s", tc.encoding, status, body, tc.status, tc.code)
		}
		if status == http.StatusUnsupportedMediaType && h.Get("Accept-Encoding") != "zstd, gzip" {
			t.Fatalf("a 415 for Content-Encoding %q says Accept-Encoding %q", tc.encoding, h.Get("Accept-Encoding"))
		}
	}

	// Compression off: every reply as it is, and no Vary.
	url, c = serve(t, gateway.New(testRegistry(t), gateway.Options{CompressMin: -1}))
	status, h, body := post(t, c, url, "Test/Big", gateway.ContentRaw, "5000", "Accept-Encoding", "zstd, gzip")
	if status != http.StatusOK || h.Get("Content-Encoding") != "" || h.Get("Vary") != "" || body != big {
		t.Fatalf("compression off: %d, Content-Encoding %q, Vary %q, %d bytes", status, h.Get("Content-Encoding"), h.Get("Vary"), len(body))
	}
}

// TestBodyNotWhole: a body that ends before its length, a chunk that is
// not HTTP, or a body slower than the server's read timeout is refused
// before any call, unprocessed, with 400 or 408 and a message naming no
// socket; on /rpc/ and /jsonrpc alike.
func TestBodyNotWhole(t *testing.T) {
	var ran atomic.Int64
	reg := testRegistry(t)
	reg.HandleFunc("Body/Count", func(_ context.Context, _, reply []byte) ([]byte, error) {
		ran.Add(1)
		return reply, nil
	})
	g := gateway.New(reg, gateway.Options{})
	mux := http.NewServeMux()
	mux.Handle("/rpc/", g)
	mux.Handle("/jsonrpc", g.JSONRPC())
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ReadTimeout = 300 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, path := range []string{"/rpc/Body/Count", "/jsonrpc"} {
		for _, tc := range []struct {
			name, head, body string
			shut             bool // half-close after the body
			status           int
			code, msg        string
		}{
			{"ends early", "Content-Length: 20\r\n", `{"a":1`, true, 400, "InvalidArgument", "the body ended before its length"},
			{"bad chunk", "Transfer-Encoding: chunked\r\n", "zz\r\n{}\r\n0\r\n\r\n", false, 400, "InvalidArgument", "reading the body: invalid byte in chunk length"},
			{"too slow", "Content-Length: 20\r\n", `{"a":1`, false, 408, "DeadlineExceeded", "the body did not arrive within the read timeout"},
		} {
			t.Run(path+" "+tc.name, func(t *testing.T) {
				nc, err := net.DialTimeout("tcp", addr, waitLimit)
				if err != nil {
					t.Fatal(err)
				}
				defer nc.Close()
				req := "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + tc.head + "\r\n" + tc.body
				if _, err := io.WriteString(nc, req); err != nil {
					t.Fatal(err)
				}
				if tc.shut {
					nc.(*net.TCPConn).CloseWrite()
				}
				nc.SetReadDeadline(time.Now().Add(waitLimit))
				resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				code, msg, unprocessed := decodeError(t, string(b))
				if resp.StatusCode != tc.status || code != tc.code || msg != tc.msg || !unprocessed {
					t.Errorf("%d %s; want %d, code %s, message %q, unprocessed", resp.StatusCode, b, tc.status, tc.code, tc.msg)
				}
			})
		}
	}
	if n := ran.Load(); n != 0 {
		t.Errorf("the handler ran %d times for bodies that never came whole", n)
	}
}
