package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/otelrpcd"
	rpcdproto "github.com/rpcd/rpcd/proto"
)

// collector is an OTLP trace receiver in this process, over HTTP
// (/v1/traces, protobuf) or gRPC, keeping every span it is sent with its
// resource's service.name and its scope.
type collector struct {
	mu    sync.Mutex
	spans []receivedSpan
	json  []string // bodies of OTLP/HTTP exports in JSON
	coltracepb.UnimplementedTraceServiceServer
}

type receivedSpan struct {
	service, scope string
	span           *tracepb.Span
}

func (c *collector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := attrString(rs.GetResource().GetAttributes(), "service.name")
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				c.spans = append(c.spans, receivedSpan{service, ss.GetScope().GetName(), sp})
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// ServeHTTP takes OTLP/HTTP in protobuf, and keeps the bodies of exports
// in JSON as they are.
func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if r.Header.Get("Content-Type") == "application/json" && r.URL.Path == "/v1/traces" && err == nil {
		c.mu.Lock()
		c.json = append(c.json, string(body))
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
		return
	}
	req := &coltracepb.ExportTraceServiceRequest{}
	if err != nil || r.URL.Path != "/v1/traces" || proto.Unmarshal(body, req) != nil {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	resp, _ := c.Export(r.Context(), req)
	b, _ := proto.Marshal(resp)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

// startHTTP serves the collector over OTLP/HTTP and returns its endpoint.
func (c *collector) startHTTP(t *testing.T) string {
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return srv.URL
}

// startGRPC serves the collector over OTLP/gRPC and returns its endpoint.
func (c *collector) startGRPC(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(s, c)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(ln)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-done
	})
	return "http://" + ln.Addr().String()
}

// spansOf returns the spans received in the trace traceID (hex).
func (c *collector) spansOf(traceID string) []receivedSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []receivedSpan
	for _, s := range c.spans {
		if hex.EncodeToString(s.span.GetTraceId()) == traceID {
			out = append(out, s)
		}
	}
	return out
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.spans)
}

func attrString(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

func attrInt(kvs []*commonpb.KeyValue, key string) (int64, bool) {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			return kv.GetValue().GetIntValue(), true
		}
	}
	return 0, false
}

// startServeEnv is startServe with env added to the environment, and the
// JSON log.
func startServeOTEL(t *testing.T, env []string, args ...string) *daemon {
	t.Helper()
	d := &daemon{exited: make(chan struct{})}
	d.cmd = exec.Command(rpcdBin, append([]string{"serve", "-addr", "127.0.0.1:0", "-log-format", "json"}, args...)...)
	d.cmd.Env = append(withoutOTEL(os.Environ()), env...)
	d.cmd.Stderr = &d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("starting rpcd serve: %v", err)
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
	})
	addr, err := waitServing(&d.log, d.exited)
	if err != nil {
		t.Fatalf("rpcd serve: %v; log:\n%s", err, d.log.String())
	}
	d.addr = addr
	return d
}

// withoutOTEL drops the OTEL_* variables of the test's own environment.
func withoutOTEL(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "OTEL_") {
			out = append(out, kv)
		}
	}
	return out
}

// TestProcessServeOTLP: `rpcd serve` with the standard OTEL_* variables
// exports a server span per call to an OTLP collector, over HTTP/protobuf
// and over gRPC: a call over TCP and one through the gateway, each with a
// traceparent and baggage, arrive as spans in the caller's trace, children
// of the caller's span, named by the route, with the rpc.* attributes, the
// rpcd code, an error's status, and the service name of OTEL_SERVICE_NAME.
// The spans still buffered are exported when SIGTERM drains the server.
func TestProcessServeOTLP(t *testing.T) {
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			col := &collector{}
			endpoint := col.startHTTP(t)
			if protocol == "grpc" {
				endpoint = col.startGRPC(t)
			}
			d := startServeOTEL(t, []string{
				"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint,
				"OTEL_EXPORTER_OTLP_PROTOCOL=" + protocol,
				"OTEL_SERVICE_NAME=rpcd-otlp-test",
				"OTEL_TRACES_SAMPLER=parentbased_always_on",
				"OTEL_BSP_SCHEDULE_DELAY=60000", // nothing before the drain: the flush at SIGTERM sends it all
			}, "-gateway", "127.0.0.1:0")
			if !strings.Contains(d.log.String(), `"msg":"rpcd: exporting spans","protocol":"`+protocol+`","endpoint":"`+endpoint+`"`) {
				t.Errorf("no line saying where spans go:\n%s", d.log.String())
			}

			const (
				tcpTrace, tcpParent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
				badTrace, badParent = "4bf92f3577b34da6a3ce929d0e0e4737", "00f067aa0ba902b8"
				gwTrace, gwParent   = "4bf92f3577b34da6a3ce929d0e0e4738", "00f067aa0ba902b9"
			)
			traceparent := func(trace, parent string) string { return "00-" + trace + "-" + parent + "-01" }
			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			c, err := client.Dial(ctx, d.addr, client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			traced := func(trace, parent string) context.Context {
				return client.WithMetadata(client.WithMetadata(ctx, rpcdproto.MetaTraceParent, traceparent(trace, parent)), rpcdproto.MetaBaggage, "tenant=acme")
			}
			var sum int64
			if err := c.Call(traced(tcpTrace, tcpParent), "Math/Sum", map[string]int{"a": 1, "b": 2}, &sum); err != nil || sum != 3 {
				t.Fatalf("Math/Sum: %d, %v", sum, err)
			}
			if err := c.Call(traced(badTrace, badParent), "Math/Sum", map[string]string{"a": "x"}, &sum); err == nil {
				t.Fatal("Math/Sum with a string for a: no error")
			}
			req, _ := http.NewRequest(http.MethodPost, "http://"+gatewayAddr(t, d.log.String())+"/rpc/Math/Sum", strings.NewReader(`{"a":2,"b":2}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("traceparent", traceparent(gwTrace, gwParent))
			req.Header.Set("baggage", "tenant=acme")
			hc := &http.Client{Timeout: runTimeout, Transport: &http.Transport{}}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			hc.CloseIdleConnections()
			if resp.StatusCode != 200 || string(body) != "4" {
				t.Fatalf("gateway: %d %s", resp.StatusCode, body)
			}
			c.Close()

			if code := d.stop(t, syscall.SIGTERM); code != 0 {
				t.Fatalf("exit status %d; log:\n%s", code, d.log.String())
			}
			check := func(name, trace, parent string, code int64) *tracepb.Span {
				spans := col.spansOf(trace)
				if len(spans) != 1 {
					t.Fatalf("%s: %d spans in trace %s, want 1 (%d received); log:\n%s", name, len(spans), trace, col.count(), d.log.String())
				}
				s := spans[0]
				sp := s.span
				if sp.GetName() != "Math/Sum" || hex.EncodeToString(sp.GetParentSpanId()) != parent || sp.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
					t.Errorf("%s: span %q, parent %x, kind %v; want Math/Sum, %s, server", name, sp.GetName(), sp.GetParentSpanId(), sp.GetKind(), parent)
				}
				if s.service != "rpcd-otlp-test" || s.scope != otelrpcd.ScopeName {
					t.Errorf("%s: service.name %q, scope %q", name, s.service, s.scope)
				}
				for key, want := range map[string]string{"rpc.system": "rpcd", "rpc.service": "Math", "rpc.method": "Sum"} {
					if got := attrString(sp.GetAttributes(), key); got != want {
						t.Errorf("%s: %s = %q, want %q", name, key, got, want)
					}
				}
				if got, ok := attrInt(sp.GetAttributes(), string(otelrpcd.AttrCode)); !ok || got != code {
					t.Errorf("%s: %s = %d (%v), want %d", name, otelrpcd.AttrCode, got, ok, code)
				}
				return sp
			}
			if sp := check("over TCP", tcpTrace, tcpParent, 0); sp.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR {
				t.Errorf("over TCP: status %v", sp.GetStatus())
			}
			bad := check("a bad argument", badTrace, badParent, int64(rpcdproto.CodeInvalidArgument))
			if st := bad.GetStatus(); st.GetCode() != tracepb.Status_STATUS_CODE_ERROR || st.GetMessage() != `invalid argument: Math/Sum: argument: field "a": want a number, got a string at byte 6` {
				t.Errorf("a bad argument: status %v", st)
			}
			check("through the gateway", gwTrace, gwParent, 0)
		})
	}
}

// TestProcessServeOTLPJSON: OTEL_EXPORTER_OTLP_PROTOCOL=http/json sends
// the spans as OTLP/JSON, the caller's trace id in them; without
// OTEL_SERVICE_NAME the service is "rpcd".
func TestProcessServeOTLPJSON(t *testing.T) {
	col := &collector{}
	d := startServeOTEL(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + col.startHTTP(t), "OTEL_EXPORTER_OTLP_PROTOCOL=http/json"})
	r := rpcd(t, "", "call", "-addr", d.addr, "-meta", "traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "Math/Sum", `{"a":1,"b":2}`)
	if r.code != 0 {
		t.Fatalf("call: %d %s", r.code, r.stderr)
	}
	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status %d", code)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.json) != 1 || !strings.Contains(strings.ToLower(col.json[0]), `"traceid":"4bf92f3577b34da6a3ce929d0e0e4736"`) ||
		!strings.Contains(col.json[0], `"name":"Math/Sum"`) || !strings.Contains(col.json[0], `{"key":"service.name","value":{"stringValue":"rpcd"}}`) {
		t.Errorf("JSON exports %q", col.json)
	}
}

// TestProcessServeOTLPOff: without an endpoint, or with OTEL_SDK_DISABLED,
// serve makes no spans and says nothing of them; a protocol it cannot
// speak stops it with exit status 2, naming the variable.
func TestProcessServeOTLPOff(t *testing.T) {
	col := &collector{}
	endpoint := col.startHTTP(t)
	for _, tc := range []struct {
		name string
		env  []string
	}{
		{"no endpoint", []string{"OTEL_SERVICE_NAME=x", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"}},
		{"disabled", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_SDK_DISABLED=true", "OTEL_BSP_SCHEDULE_DELAY=10"}},
		{"exporter none", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_TRACES_EXPORTER=none", "OTEL_BSP_SCHEDULE_DELAY=10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startServeOTEL(t, tc.env)
			r := rpcd(t, "", "call", "-addr", d.addr, "-meta", "traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "Math/Sum", `{"a":1,"b":2}`)
			if r.code != 0 {
				t.Fatalf("call: %d %s", r.code, r.stderr)
			}
			if code := d.stop(t, syscall.SIGTERM); code != 0 {
				t.Fatalf("exit status %d", code)
			}
			if strings.Contains(d.log.String(), "exporting spans") || col.count() != 0 {
				t.Errorf("%d spans received; log:\n%s", col.count(), d.log.String())
			}
		})
	}

	for _, tc := range []struct{ env, want string }{
		{"OTEL_EXPORTER_OTLP_PROTOCOL=thrift", `rpcd serve: $OTEL_EXPORTER_OTLP_PROTOCOL is "thrift", want grpc, http/protobuf or http/json`},
		{"OTEL_TRACES_EXPORTER=zipkin", `rpcd serve: $OTEL_TRACES_EXPORTER is "zipkin", want otlp or none`},
	} {
		cmd := exec.Command(rpcdBin, "serve", "-addr", "127.0.0.1:0")
		cmd.Env = append(withoutOTEL(os.Environ()), "OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint, tc.env)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		done := make(chan error, 1)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitUsage || !strings.HasPrefix(stderr.String(), tc.want+"\n") {
				t.Errorf("%s: %v, stderr %q; want exit status 2 and %q", tc.env, err, stderr.String(), tc.want)
			}
		case <-time.After(runTimeout):
			_ = cmd.Process.Kill()
			t.Fatalf("%s: serve did not stop", tc.env)
		}
	}
}
