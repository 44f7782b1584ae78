package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/admin"
	"github.com/rpcd/rpcd/gateway"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/buildinfo"
	"github.com/rpcd/rpcd/reactor"
)

// TestGatewayMetrics: with the gateway in Options, /metrics counts its
// responses by route and status, its calls answered with an error in
// rpcd_errors_total with the RPC port's (a handler's error through the
// gateway no longer counts only in rpcd_calls_total), JSON-RPC's too;
// /stats.json's errors have them; and rpcd_build_info says which rpcd
// this is, as rpcd version does.
func TestGatewayMetrics(t *testing.T) {
	reg := testRoutes()
	gw := gateway.New(reg, gateway.Options{})
	r := newRigAdmin(t, reg, reactor.Options{}, admin.Options{Gateway: gw})
	mux := http.NewServeMux()
	mux.Handle(gateway.JSONRPCPath, gw.JSONRPC())
	mux.Handle("/", gw)
	hs := httptest.NewServer(mux)
	defer hs.Close()

	// Over TCP: one handler error, one refusal.
	c := r.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.CallRaw(ctx, "Test/Denied", nil, nil); !errors.Is(err, handler.ErrPermissionDenied) {
		t.Fatalf("Test/Denied over TCP: %v", err)
	}
	if _, err := c.CallRaw(ctx, "No/Such", nil, nil); !errors.Is(err, handler.ErrNotFound) {
		t.Fatalf("No/Such over TCP: %v", err)
	}
	// Through the gateway.
	for _, tc := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/rpc/Math/Sum", `{"a":1,"b":2}`, 200},
		{"POST", "/rpc/Math/Sum", `{"a":2,"b":2}`, 200},
		{"POST", "/rpc/Test/Denied", `{}`, 403},
		{"POST", "/rpc/Test/Denied", `{}`, 403},
		{"POST", "/rpc/Made/Up/Route", `{}`, 404},
		{"GET", "/rpc/Math/Sum", ``, 405},
		{"GET", "/favicon.ico", ``, 404},
		{"POST", gateway.JSONRPCPath, `[{"jsonrpc":"2.0","method":"Test/Denied","id":1},{"jsonrpc":"2.0","method":"Math/Sum","params":{"a":1,"b":1},"id":2}]`, 200},
	} {
		req, _ := http.NewRequest(tc.method, hs.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Fatalf("%s %s: %d, want %d", tc.method, tc.path, resp.StatusCode, tc.status)
		}
	}

	got := scrape(t, r.admin)
	build := buildinfo.Read()
	want := map[string]float64{
		`rpcd_gateway_responses_total{route="Math/Sum",status="200"}`:    2,
		`rpcd_gateway_responses_total{route="Test/Denied",status="403"}`: 2,
		`rpcd_gateway_responses_total{route="unknown",status="404"}`:     2,
		`rpcd_gateway_responses_total{route="Math/Sum",status="405"}`:    1,
		`rpcd_gateway_responses_total{route="jsonrpc",status="200"}`:     1,
		// TCP 1 + gateway 2 + JSON-RPC 1
		`rpcd_errors_total{code="PermissionDenied"}`: 4,
		// TCP 1 + gateway 1 (the path outside /rpc/ is no call)
		`rpcd_errors_total{code="NotFound"}`:      2,
		`rpcd_errors_total{code="Unimplemented"}`: 1,
		// The handlers' own count, both transports.
		`rpcd_calls_total{code="PermissionDenied",route="Test/Denied"}`:                                                           4,
		`rpcd_calls_total{code="OK",route="Math/Sum"}`:                                                                            3,
		`rpcd_build_info{go_version="` + build.GoVersion + `",revision="` + build.Revision + `",version="` + build.Version + `"}`: 1,
	}
	for key, w := range want {
		if v, ok := got[key]; !ok || v != w {
			t.Errorf("%s = %v (present: %v), want %v", key, v, ok, w)
		}
	}
	for key := range got {
		if strings.Contains(key, "Made/Up") || strings.Contains(key, "favicon") {
			t.Errorf("a path no route has makes a series of its own: %s", key)
		}
		if strings.HasPrefix(key, "rpcd_gateway_responses_total") && want[key] == 0 {
			t.Errorf("a series not asked for: %s", key)
		}
	}

	var st admin.Stats
	code, body := get(t, r.admin+"/stats.json")
	if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil {
		t.Fatalf("/stats.json: %d %v", code, err)
	}
	if st.Errors != 7 || st.ErrorsByCode["PermissionDenied"] != 4 || st.ErrorsByCode["NotFound"] != 2 || st.ErrorsByCode["Unimplemented"] != 1 {
		t.Errorf("/stats.json errors %d by code %v, want 7: 4 PermissionDenied, 2 NotFound, 1 Unimplemented", st.Errors, st.ErrorsByCode)
	}
	if st.Version != build.Version || st.Revision != build.Revision || st.GoVersion != build.GoVersion {
		t.Errorf("/stats.json build %s %s %s, want %+v", st.Version, st.Revision, st.GoVersion, build)
	}
}

// TestBuildInfoWithoutGateway: rpcd_build_info is there without a
// gateway, and no gateway series.
func TestBuildInfoWithoutGateway(t *testing.T) {
	r := newRig(t, nil)
	got := scrape(t, r.admin)
	n := 0
	for key, v := range got {
		if strings.HasPrefix(key, "rpcd_build_info{") {
			n++
			if v != 1 || !strings.Contains(key, `go_version="go`) {
				t.Errorf("%s %v", key, v)
			}
		}
		if strings.HasPrefix(key, "rpcd_gateway_") {
			t.Errorf("a gateway series without a gateway: %s", key)
		}
	}
	if n != 1 {
		t.Errorf("%d rpcd_build_info series, want 1", n)
	}
}
