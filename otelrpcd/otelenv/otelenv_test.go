package otelenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/rpcd/rpcd/internal/leaktest"
	"github.com/rpcd/rpcd/otelrpcd/otelenv"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// TestFromEnv: which variables turn tracing on, which off, the protocol
// chosen, and the values refused with the variable named.
func TestFromEnv(t *testing.T) {
	const ep = "http://127.0.0.1:1"
	for _, tc := range []struct {
		name      string
		env       map[string]string
		on        bool
		protocol  string
		endpoint  string
		wantError string
	}{
		{name: "nothing set", env: nil},
		{name: "a service name alone", env: map[string]string{"OTEL_SERVICE_NAME": "x"}},
		{name: "an endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep}, on: true, protocol: "http/protobuf", endpoint: ep},
		{name: "the traces endpoint first", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ep + "/t"}, on: true, protocol: "http/protobuf", endpoint: ep + "/t"},
		{name: "otlp asked for, default endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true, protocol: "http/protobuf"},
		{name: "grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true, protocol: "grpc", endpoint: ep},
		{name: "the traces protocol first", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, on: true, protocol: "http/json", endpoint: ep},
		{name: "disabled", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_SDK_DISABLED": "TRUE"}},
		{name: "exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_EXPORTER": "none"}},
		{name: "another exporter", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_EXPORTER": "zipkin"},
			wantError: `rpcd: $OTEL_TRACES_EXPORTER is "zipkin", want otlp or none`},
		{name: "another protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "thrift"},
			wantError: `rpcd: $OTEL_EXPORTER_OTLP_TRACES_PROTOCOL is "thrift", want grpc, http/protobuf or http/json`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, name := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
				"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SERVICE_NAME"} {
				t.Setenv(name, tc.env[name])
			}
			tr, err := otelenv.FromEnv(context.Background(), otelenv.Options{ServiceName: "test"})
			if tc.wantError != "" {
				if err == nil || err.Error() != tc.wantError {
					t.Fatalf("error %v, want %s", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			defer tr.Shutdown(ctx)
			if on := tr.Provider != nil; on != tc.on || tc.on && (tr.Protocol != tc.protocol || tr.Endpoint != tc.endpoint) {
				t.Errorf("on %v, protocol %q, endpoint %q; want %v, %q, %q", on, tr.Protocol, tr.Endpoint, tc.on, tc.protocol, tc.endpoint)
			}
		})
	}
}
