package main

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/otelrpcd"
	"github.com/rpcd/rpcd/otelrpcd/otelenv"
)

// tracingFlushTimeout bounds the export of the spans still buffered when
// serve stops.
const tracingFlushTimeout = 5 * time.Second

// startTracing sets up the tracing the OTEL_* environment asks for
// (otelenv: an OTLP endpoint named, OTEL_SDK_DISABLED not true) and adds
// its server spans to reg as middleware; with none asked for, reg is left
// as it is and calls pay nothing. stop exports the spans still buffered,
// for serve to call once the calls have drained. A variable whose value
// cannot be followed is a usage error, as a bad flag is.
func startTracing(reg *handler.Registry, logger *slog.Logger) (stop func(), err error) {
	t, err := otelenv.FromEnv(context.Background(), otelenv.Options{ServiceName: "rpcd", Logger: logger})
	if err != nil {
		return nil, usagef("%s", strings.TrimPrefix(err.Error(), "rpcd: "))
	}
	if t.Provider == nil {
		return func() {}, nil
	}
	reg.Use(otelrpcd.Middleware(t.Provider))
	endpoint := t.Endpoint
	if endpoint == "" {
		endpoint = "the exporter's default"
	}
	logger.Info("rpcd: exporting spans", "protocol", t.Protocol, "endpoint", endpoint)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
		defer cancel()
		if err := t.Shutdown(ctx); err != nil {
			logger.Warn("rpcd: exporting the last spans", "err", err)
		}
	}, nil
}
