// Package otelrpcd makes OpenTelemetry spans for rpcd calls, carrying W3C
// trace context (traceparent, tracestate) and W3C baggage (baggage) in call
// metadata.
//
// Middleware, installed on a handler.Registry, makes a server span for
// every call, named by the route, as the child of the span whose
// traceparent the call carries; its status is the call's rpcd code.
// Package otelclient's Interceptor, installed on a client, makes a client
// span for every call and has the call carry it; Inject gives a caller's
// rpcd calls the trace context of the span in its context without a span
// of their own. A
// handler that calls on with its own context passes the trace on by
// itself: the middleware puts its span's trace context there, and without
// the middleware the client passes on the traceparent the incoming call
// carried. Baggage travels the same way: the handler's context holds the
// baggage its call carried (baggage.FromContext), and its calls carry it on.
// Such a handler waits for the call, so its route is registered with
// handler.Blocking(): an inline handler's calls that wait are refused
// (handler/transport.RefuseWait).
//
// Only this package and its subpackages import OpenTelemetry: a program
// that does not use them pays nothing for it, and Middleware(nil) leaves
// every handler as it is. This package does not import rpcd's client:
// otelclient does.
package otelrpcd

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/rpcd/rpcd/handler"

	"github.com/rpcd/rpcd/proto"
)

// ScopeName is the instrumentation scope of the spans: the tracer's name.
const ScopeName = "github.com/rpcd/rpcd/otelrpcd"

// Span attribute keys, after OpenTelemetry's RPC conventions.
const (
	AttrSystem  = attribute.Key("rpc.system")           // "rpcd"
	AttrService = attribute.Key("rpc.service")          // the route's Controller
	AttrMethod  = attribute.Key("rpc.method")           // the route's Action
	AttrCode    = attribute.Key("rpc.rpcd.status_code") // the rpcd code, 0 for OK
)

// propagator reads and writes what calls carry in their metadata: W3C
// trace context and W3C baggage.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Attributes returns the attributes of a span of a call to route: the
// system, and the route's Controller and Action as service and method.
func Attributes(route string) []attribute.KeyValue {
	service, method, _ := strings.Cut(route, "/")
	return []attribute.KeyValue{AttrSystem.String("rpcd"), AttrService.String(service), AttrMethod.String(method)}
}

// SetOutcome sets span's outcome, the rpcd code of err, as an attribute and, for
// an error, as its status.
func SetOutcome(span trace.Span, err error) {
	code := handler.CodeOf(err)
	span.SetAttributes(AttrCode.Int(int(code)))
	if err != nil {
		span.SetStatus(codes.Error, code.String()+": "+handler.MessageOf(err))
	}
}

// Middleware returns handler middleware that makes a server span with
// tp's tracer for every call: named by the route, the child of the
// traceparent in the call's metadata (a root span without one), ended when
// the handler returns, with the rpcd code as an attribute and, for an
// error, as its status. The handler's context carries the span and the
// call's baggage, and both for the rpcd calls it makes.
//
// With a nil tp, the middleware returns every handler unchanged: no span
// and no cost on the call path.
func Middleware(tp trace.TracerProvider) handler.Middleware {
	if tp == nil {
		return func(next handler.Handler) handler.Handler { return next }
	}
	tracer := tp.Tracer(ScopeName)
	return func(next handler.Handler) handler.Handler {
		return handler.HandlerFunc(func(ctx context.Context, req, reply []byte) (out []byte, err error) {
			call := handler.CallFrom(ctx)
			if call == nil {
				return next.ServeRPC(ctx, req, reply)
			}
			parent := propagator.Extract(ctx, carrier(call.Metadata))
			sctx, span := tracer.Start(parent, call.Route, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(Attributes(call.Route)...))
			defer func() {
				if p := recover(); p != nil {
					// Route.Serve turns the panic into an Internal error
					// above this middleware; the span says so too.
					span.SetAttributes(AttrCode.Int(int(proto.CodeInternal)))
					span.SetStatus(codes.Error, fmt.Sprintf("%v: handler panicked: %v", proto.CodeInternal, p))
					span.End()
					panic(p)
				}
				SetOutcome(span, err)
				span.End()
			}()
			return next.ServeRPC(Inject(sctx), req, reply)
		})
	}
}

// Inject returns a context whose rpcd calls carry the trace context of the
// span in ctx and the baggage in ctx (go.opentelemetry.io/otel/baggage),
// through handler.WithTraceContext and WithBaggage, or ctx itself if it
// has neither.
func Inject(ctx context.Context) context.Context {
	if !trace.SpanContextFromContext(ctx).IsValid() && baggage.FromContext(ctx).Len() == 0 {
		return ctx
	}
	mc := propagation.MapCarrier{}
	propagator.Inject(ctx, mc)
	if tp := mc[proto.MetaTraceParent]; tp != "" {
		ctx = handler.WithTraceContext(ctx, tp, mc[proto.MetaTraceState])
	}
	if b := mc[proto.MetaBaggage]; b != "" {
		ctx = handler.WithBaggage(ctx, b)
	}
	return ctx
}

// carrier reads trace context and baggage from call metadata for a
// propagator.
type carrier proto.Metadata

// Get returns the value of key, or its values joined with commas, as W3C
// Baggage joins repeated headers (a repeated traceparent joined is
// invalid, as it should be).
func (c carrier) Get(key string) string {
	var joined []byte
	n := 0
	proto.Metadata(c).Range(func(k, v []byte) bool {
		if string(k) == key {
			if n > 0 {
				joined = append(joined, ',')
			}
			joined = append(joined, v...)
			n++
		}
		return true
	})
	return string(joined)
}

func (c carrier) Set(string, string) {} // read only: calls carry metadata out through handler.WithTraceContext and WithBaggage

func (c carrier) Keys() []string {
	var keys []string
	proto.Metadata(c).Range(func(k, _ []byte) bool {
		keys = append(keys, string(k))
		return true
	})
	return keys
}
