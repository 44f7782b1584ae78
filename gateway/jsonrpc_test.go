package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rpcd/rpcd/auth"
	"github.com/rpcd/rpcd/gateway"
	"github.com/rpcd/rpcd/proto"
)

// rpc POSTs body to the JSON-RPC handler at url and returns the status
// and the body.
func rpc(t *testing.T, c *http.Client, url, body string, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
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
	return resp.StatusCode, string(b)
}

// same reports whether two JSON texts hold the same value.
func same(t *testing.T, got, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("%q is not JSON: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %q is not JSON: %v", want, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	return string(gb) == string(wb)
}

// TestJSONRPC: requests, notifications and batches, with the
// specification's error codes and rpcd's code in the error's data.
func TestJSONRPC(t *testing.T) {
	g := gateway.New(testRegistry(t), gateway.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	url, c := serve(t, g.JSONRPC())
	for _, tc := range []struct {
		name, body string
		status     int
		want       string // "" for no body
	}{
		{"a call", `{"jsonrpc":"2.0","method":"Math/Sum","params":{"A":1,"B":2},"id":1}`, 200,
			`{"jsonrpc":"2.0","result":3,"id":1}`},
		{"params by position", `{"jsonrpc":"2.0","method":"Math/Sum","params":[{"A":40,"B":2}],"id":"a"}`, 200,
			`{"jsonrpc":"2.0","result":42,"id":"a"}`},
		{"no params", `{"jsonrpc":"2.0","method":"Math/Sum","id":null}`, 200,
			`{"jsonrpc":"2.0","result":0,"id":null}`},
		{"a raw route with a JSON reply", `{"jsonrpc":"2.0","method":"Bytes/Echo","params":{"x":[1,2]},"id":2}`, 200,
			`{"jsonrpc":"2.0","result":{"x":[1,2]},"id":2}`},
		{"a notification", `{"jsonrpc":"2.0","method":"Math/Sum","params":{"A":1}}`, 204, ""},
		{"no such route", `{"jsonrpc":"2.0","method":"No/Such","id":3}`, 200,
			`{"jsonrpc":"2.0","error":{"code":-32601,"message":"no route No/Such","data":{"code":5,"name":"NotFound","unprocessed":true}},"id":3}`},
		{"params that do not decode", `{"jsonrpc":"2.0","method":"Math/Sum","params":{"A":"x"},"id":4}`, 200, ``},
		{"two params by position", `{"jsonrpc":"2.0","method":"Math/Sum","params":[1,2],"id":5}`, 200,
			`{"jsonrpc":"2.0","error":{"code":-32602,"message":"invalid params: by position, give the route's one argument: [ARG]","data":{"code":3,"name":"InvalidArgument","unprocessed":true}},"id":5}`},
		{"an error with a code", `{"jsonrpc":"2.0","method":"Test/Fail","params":{"code":7,"message":"no"},"id":6}`, 200,
			`{"jsonrpc":"2.0","error":{"code":-32000,"message":"no","data":{"code":7,"name":"PermissionDenied"}},"id":6}`},
		{"a panic", `{"jsonrpc":"2.0","method":"Test/Fail","params":{"code":-2},"id":7}`, 200, ``},
		{"not JSON", `{"jsonrpc":"2.0","method"`, 200,
			`{"jsonrpc":"2.0","error":{"code":-32700,"message":"parse error: the body is not JSON","data":{"code":3,"name":"InvalidArgument","unprocessed":true}},"id":null}`},
		{"not a request", `{"jsonrpc":"1.0","method":"Math/Sum","id":8}`, 200, ``},
		{"an empty batch", `[]`, 200,
			`{"jsonrpc":"2.0","error":{"code":-32600,"message":"invalid request: an empty batch","data":{"code":3,"name":"InvalidArgument","unprocessed":true}},"id":null}`},
		{"a batch", `[{"jsonrpc":"2.0","method":"Math/Sum","params":{"A":1,"B":1},"id":1},
			{"jsonrpc":"2.0","method":"Math/Sum","params":{"A":9}},
			{"jsonrpc":"2.0","method":"No/Such","id":2},
			42]`, 200,
			`[{"jsonrpc":"2.0","result":2,"id":1},
			{"jsonrpc":"2.0","error":{"code":-32601,"message":"no route No/Such","data":{"code":5,"name":"NotFound","unprocessed":true}},"id":2},
			{"jsonrpc":"2.0","error":{"code":-32600,"message":"invalid request: want an object with \"jsonrpc\": \"2.0\", a string \"method\", and an \"id\" that is a string, a number or null if any","data":{"code":3,"name":"InvalidArgument","unprocessed":true}},"id":null}]`},
		{"a batch of notifications", `[{"jsonrpc":"2.0","method":"Math/Sum"},{"jsonrpc":"2.0","method":"No/Such"}]`, 204, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := rpc(t, c, url, tc.body)
			if status != tc.status {
				t.Fatalf("status %d, want %d; body %s", status, tc.status, body)
			}
			if tc.status == 204 {
				if body != "" {
					t.Fatalf("a 204 with a body: %s", body)
				}
				return
			}
			if tc.want != "" && !same(t, body, tc.want) {
				t.Fatalf("got  %s\nwant %s", body, tc.want)
			}
			var resp struct {
				Error *struct {
					Code int `json:"code"`
					Data *struct {
						Code int `json:"code"`
					} `json:"data"`
				} `json:"error"`
			}
			_ = json.Unmarshal([]byte(body), &resp)
			switch tc.name {
			case "params that do not decode":
				if resp.Error == nil || resp.Error.Code != gateway.JSONRPCInvalidParams || resp.Error.Data.Code != 3 {
					t.Fatalf("got %s, want -32602 with rpcd's InvalidArgument", body)
				}
			case "a panic":
				if resp.Error == nil || resp.Error.Code != gateway.JSONRPCInternalError || resp.Error.Data.Code != 13 {
					t.Fatalf("got %s, want -32603 with rpcd's Internal", body)
				}
			case "not a request":
				if resp.Error == nil || resp.Error.Code != gateway.JSONRPCInvalidRequest {
					t.Fatalf("got %s, want -32600", body)
				}
			}
		})
	}
}

// TestJSONRPCAuth: JSON-RPC calls authenticate as the gateway's others do,
// and refusals by authorization come back as errors with rpcd's code.
func TestJSONRPCAuth(t *testing.T) {
	reg := testRegistry(t)
	reg.Use(auth.Require(auth.Roles(map[string][]string{"Math/Sum": {"admin"}})))
	g := gateway.New(reg, gateway.Options{Authenticator: auth.Tokens{
		"t-admin": {Subject: "root", Roles: []string{"admin"}},
		"t-user":  {Subject: "u"},
	}})
	url, c := serve(t, g.JSONRPC())
	call := `{"jsonrpc":"2.0","method":"Math/Sum","params":{"A":1,"B":2},"id":1}`
	if status, _ := rpc(t, c, url, call); status != http.StatusUnauthorized {
		t.Fatalf("no token: status %d, want 401", status)
	}
	if _, body := rpc(t, c, url, call, "Authorization", "Bearer t-admin"); !same(t, body, `{"jsonrpc":"2.0","result":3,"id":1}`) {
		t.Fatalf("admin: %s", body)
	}
	_, body := rpc(t, c, url, call, "Authorization", "Bearer t-user")
	if !strings.Contains(body, `"name":"PermissionDenied"`) || !strings.Contains(body, `"code":-32000`) {
		t.Fatalf("a user without the role: %s", body)
	}
}

// TestJSONRPCBatchBounded: a batch's responses are held to the frame
// limit as a reply is: the request whose responses pass it fails whole,
// 429 ResourceExhausted naming the call where they did, and the calls
// after it are not run.
func TestJSONRPCBatchBounded(t *testing.T) {
	reg := testRegistry(t)
	var ran atomic.Int64
	reg.HandleFunc("Big/Reply", func(_ context.Context, _, reply []byte) ([]byte, error) {
		ran.Add(1)
		return append(append(append(reply, '"'), strings.Repeat("x", 1000)...), '"'), nil
	})
	g := gateway.New(reg, gateway.Options{Limits: proto.Limits{MaxFrameSize: 4096}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	url, c := serve(t, g.JSONRPC())
	one := `{"jsonrpc":"2.0","method":"Big/Reply","id":%d}`
	var calls []string
	for i := range 6 {
		calls = append(calls, fmt.Sprintf(one, i))
	}
	status, body := rpc(t, c, url, "["+strings.Join(calls[:3], ",")+"]")
	if status != http.StatusOK || ran.Load() != 3 {
		t.Fatalf("3 replies of 1 KB: %d, %d run, %.200s", status, ran.Load(), body)
	}
	ran.Store(0)
	status, body = rpc(t, c, url, "["+strings.Join(calls, ",")+"]")
	code, msg, unprocessed := decodeError(t, body)
	if status != http.StatusTooManyRequests || code != "ResourceExhausted" || unprocessed ||
		!strings.Contains(msg, "at its call 4 of 6") || ran.Load() != 4 {
		t.Errorf("6 replies of 1 KB under a 4 KiB frame limit: %d %s, %d run; want 429 ResourceExhausted at call 4, 4 run", status, body, ran.Load())
	}
}
