// Package otelenv sets up OpenTelemetry tracing as the standard OTEL_*
// environment variables ask: spans exported in batches over OTLP, by gRPC
// or HTTP, to the collector the variables name, sampled and described as
// they say. `rpcd serve` uses it; a Go program that embeds rpcd can too,
// and give the provider to otelrpcd.Middleware and otelclient.Interceptor.
//
// Tracing is on when the environment names an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or
// asks for the otlp exporter (OTEL_TRACES_EXPORTER=otlp, which sends to
// the default endpoint), and off otherwise, or when OTEL_SDK_DISABLED is
// true or OTEL_TRACES_EXPORTER is none: then FromEnv returns no provider
// and a program makes no spans at all. The protocol is
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL: grpc,
// http/protobuf (the default) or http/json. Everything else (headers,
// certificates, timeout, compression; OTEL_TRACES_SAMPLER and its
// argument; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; the batch
// processor's OTEL_BSP_*) is read by the OpenTelemetry SDK and exporters
// themselves, as their documentation says.
//
// This package is apart from otelrpcd so that a program that only makes
// spans does not link the exporters and their gRPC.
package otelenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Options configures FromEnv. The zero Options is valid.
type Options struct {
	// ServiceName is the service.name of the spans when neither
	// OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES gives one; default
	// the SDK's, "unknown_service:" and the program's name.
	ServiceName string

	// Logger, if set, receives what goes wrong while spans are exported (a
	// collector that cannot be reached, say), at warn level: FromEnv makes
	// it OpenTelemetry's global error handler. If nil, the handler is left
	// as it is.
	Logger *slog.Logger
}

// Tracing is the tracing the environment asked for.
type Tracing struct {
	// Provider makes the spans and exports them; nil when the environment
	// asks for no tracing.
	Provider *sdktrace.TracerProvider
	// Protocol is the OTLP protocol: "grpc", "http/protobuf" or "http/json".
	Protocol string
	// Endpoint is where spans go, as the environment gave it; empty for
	// the exporter's default.
	Endpoint string
}

// Shutdown exports the spans still buffered, within ctx, and stops the
// provider. It does nothing when tracing is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.Provider == nil {
		return nil
	}
	return t.Provider.Shutdown(ctx)
}

// Variables read here; the SDK and the exporters read the others.
const (
	envDisabled       = "OTEL_SDK_DISABLED"
	envExporter       = "OTEL_TRACES_EXPORTER"
	envEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
)

// FromEnv returns the tracing the environment asks for: a Tracing whose
// Provider is nil when it asks for none. An error names the variable whose
// value it cannot follow.
func FromEnv(ctx context.Context, opts Options) (*Tracing, error) {
	get := func(name string) string { return strings.TrimSpace(os.Getenv(name)) }
	if strings.EqualFold(get(envDisabled), "true") {
		return &Tracing{}, nil
	}
	endpoint := get(envTracesEndpoint)
	if endpoint == "" {
		endpoint = get(envEndpoint)
	}
	switch exp := strings.ToLower(get(envExporter)); exp {
	case "":
		if endpoint == "" {
			return &Tracing{}, nil
		}
	case "otlp":
	case "none":
		return &Tracing{}, nil
	default:
		return nil, fmt.Errorf("rpcd: $%s is %q, want otlp or none", envExporter, get(envExporter))
	}
	t := &Tracing{Endpoint: endpoint, Protocol: get(envTracesProtocol)}
	from := envTracesProtocol
	if t.Protocol == "" {
		t.Protocol, from = get(envProtocol), envProtocol
	}
	var exporter sdktrace.SpanExporter
	var err error
	switch t.Protocol {
	case "grpc":
		exporter, err = otlptracegrpc.New(ctx)
	case "", "http/protobuf", "http/json":
		if t.Protocol == "" {
			t.Protocol = "http/protobuf"
		}
		exporter, err = otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("rpcd: $%s is %q, want grpc, http/protobuf or http/json", from, t.Protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("rpcd: the OTLP exporter: %w", err)
	}
	var base []attribute.KeyValue
	if opts.ServiceName != "" {
		base = append(base, attribute.String("service.name", opts.ServiceName))
	}
	// Later detectors win: the environment over ServiceName, and both over
	// the SDK's defaults.
	res, err := resource.New(ctx, resource.WithAttributes(base...), resource.WithFromEnv())
	if err == nil {
		res, err = resource.Merge(resource.Default(), res)
	}
	if err != nil && !errors.Is(err, resource.ErrSchemaURLConflict) {
		_ = exporter.Shutdown(ctx)
		return nil, fmt.Errorf("rpcd: $OTEL_RESOURCE_ATTRIBUTES or $OTEL_SERVICE_NAME: %w", err)
	}
	if opts.Logger != nil {
		log := opts.Logger
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn("rpcd: tracing", "err", err)
		}))
	}
	t.Provider = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	return t, nil
}
