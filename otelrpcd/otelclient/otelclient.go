// Package otelclient makes OpenTelemetry client spans for the calls rpcd's
// client sends: otelrpcd's server middleware, on the client's side. It is
// a package of its own so that a server that traces its handlers does not
// import the client.
package otelclient

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/otelrpcd"
)

// Interceptor returns a client.Interceptor that makes a client span with
// tp's tracer for every call a Client or a Cluster sends: named by the
// route, the child of the span in the call's context, ended when the call
// returns (retries included), with the rpcd code as an attribute and, for
// an error, as its status; the call carries the span's trace context
// (otelrpcd.Inject), so the server's span (otelrpcd.Middleware) is its
// child. A one-way call's span ends once it is queued. With a nil tp,
// calls go on as they are.
//
//	c, err := client.Dial(ctx, addr, client.Options{Interceptors: []client.Interceptor{otelclient.Interceptor(tp)}})
func Interceptor(tp trace.TracerProvider) client.Interceptor {
	if tp == nil {
		return func(ctx context.Context, _ *client.CallInfo, req, reply []byte, next client.Invoker) ([]byte, error) {
			return next(ctx, req, reply)
		}
	}
	tracer := tp.Tracer(otelrpcd.ScopeName)
	return func(ctx context.Context, info *client.CallInfo, req, reply []byte, next client.Invoker) ([]byte, error) {
		sctx, span := tracer.Start(ctx, info.Route, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(otelrpcd.Attributes(info.Route)...))
		defer span.End()
		out, err := next(otelrpcd.Inject(sctx), req, reply)
		otelrpcd.SetOutcome(span, err)
		return out, err
	}
}
