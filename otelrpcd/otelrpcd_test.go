package otelrpcd_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/gateway"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/leaktest"
	"github.com/rpcd/rpcd/internal/servertest"
	"github.com/rpcd/rpcd/otelrpcd"
	"github.com/rpcd/rpcd/otelrpcd/otelclient"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

const waitLimit = 10 * time.Second

// recorder returns a tracer provider that records every span in memory.
func recorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, sr
}

// start serves reg on loopback and returns a client of it.
func start(t *testing.T, reg *handler.Registry) (*reactor.Server, *client.Client) {
	t.Helper()
	s := servertest.Start(t, reg, reactor.Options{Loops: 1})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	c, err := client.Dial(ctx, s.Addr().String(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return s, c
}

// spanNamed returns the one ended span named name.
func spanNamed(t *testing.T, sr *tracetest.SpanRecorder, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		if s.Name() == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %s, want 1 (of %d)", len(found), name, len(sr.Ended()))
	}
	return found[0]
}

func attr(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// TestParentChild calls a traced server from a client whose context has a
// span: the server's span is its child, named by the route, with the code
// as status; a handler that calls a second server passes its own span on.
func TestParentChild(t *testing.T) {
	tp, sr := recorder(t)

	regB := handler.NewRegistry()
	regB.Use(otelrpcd.Middleware(tp))
	regB.Handle("B/Leaf", handler.Func(func(context.Context, struct{}) (string, error) { return "leaf", nil }))
	_, toB := start(t, regB)

	regA := handler.NewRegistry()
	regA.Use(otelrpcd.Middleware(tp))
	regA.Handle("A/Ok", handler.Func(func(ctx context.Context, _ struct{}) (bool, error) {
		return trace.SpanContextFromContext(ctx).IsValid(), nil
	}))
	regA.Handle("A/Missing", handler.Func(func(context.Context, struct{}) (int, error) {
		return 0, handler.Errorf(proto.CodeNotFound, "no such thing")
	}))
	regA.Handle("A/Panic", handler.Func(func(context.Context, struct{}) (int, error) { panic("on purpose") }))
	regA.Handle("A/Hop", handler.Func(func(ctx context.Context, _ struct{}) (string, error) {
		var s string
		err := toB.Call(ctx, "B/Leaf", nil, &s) // the handler's own context: no trace code
		return s, err
	}), handler.Blocking())
	_, toA := start(t, regA)

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	ctx, root := tp.Tracer("test").Start(ctx, "root")
	rootSC := root.SpanContext()

	var inSpan bool
	if err := toA.Call(otelrpcd.Inject(ctx), "A/Ok", nil, &inSpan); err != nil {
		t.Fatal(err)
	}
	if !inSpan {
		t.Error("the handler's context carries no span")
	}
	err := toA.Call(otelrpcd.Inject(ctx), "A/Missing", nil, nil)
	if !errors.Is(err, handler.ErrNotFound) {
		t.Fatalf("A/Missing: %v", err)
	}
	if err := toA.Call(otelrpcd.Inject(ctx), "A/Panic", nil, nil); !errors.Is(err, handler.ErrInternal) {
		t.Fatalf("A/Panic: %v", err)
	}
	var leaf string
	if err := toA.Call(otelrpcd.Inject(ctx), "A/Hop", nil, &leaf); err != nil || leaf != "leaf" {
		t.Fatalf("A/Hop: %q, %v", leaf, err)
	}
	root.End()

	ok := spanNamed(t, sr, "A/Ok")
	if ok.Parent().SpanID() != rootSC.SpanID() || ok.SpanContext().TraceID() != rootSC.TraceID() || !ok.Parent().IsRemote() {
		t.Errorf("A/Ok: parent %v in trace %v, want the remote root %v in trace %v",
			ok.Parent().SpanID(), ok.SpanContext().TraceID(), rootSC.SpanID(), rootSC.TraceID())
	}
	if ok.SpanKind() != trace.SpanKindServer || ok.Status().Code != codes.Unset {
		t.Errorf("A/Ok: kind %v, status %v", ok.SpanKind(), ok.Status())
	}
	for key, want := range map[attribute.Key]string{otelrpcd.AttrSystem: "rpcd", otelrpcd.AttrService: "A", otelrpcd.AttrMethod: "Ok"} {
		if v, _ := attr(ok, key); v.AsString() != want {
			t.Errorf("A/Ok: %s = %q, want %q", key, v.AsString(), want)
		}
	}
	if v, found := attr(ok, otelrpcd.AttrCode); !found || v.AsInt64() != 0 {
		t.Errorf("A/Ok: code attribute %v", v.String())
	}

	missing := spanNamed(t, sr, "A/Missing")
	if st := missing.Status(); st.Code != codes.Error || st.Description != "not found: no such thing" {
		t.Errorf("A/Missing: status %+v, want Error \"not found: no such thing\"", st)
	}
	if v, _ := attr(missing, otelrpcd.AttrCode); v.AsInt64() != int64(proto.CodeNotFound) {
		t.Errorf("A/Missing: code attribute %v", v.String())
	}
	panicked := spanNamed(t, sr, "A/Panic")
	if st := panicked.Status(); st.Code != codes.Error || !strings.HasPrefix(st.Description, "internal: handler panicked: on purpose") {
		t.Errorf("A/Panic: status %+v", st)
	}

	hop, leafSpan := spanNamed(t, sr, "A/Hop"), spanNamed(t, sr, "B/Leaf")
	if hop.Parent().SpanID() != rootSC.SpanID() {
		t.Errorf("A/Hop's parent %v, want root %v", hop.Parent().SpanID(), rootSC.SpanID())
	}
	if leafSpan.Parent().SpanID() != hop.SpanContext().SpanID() || leafSpan.SpanContext().TraceID() != rootSC.TraceID() {
		t.Errorf("B/Leaf's parent %v, want A/Hop's span %v, in the root's trace", leafSpan.Parent().SpanID(), hop.SpanContext().SpanID())
	}
}

// TestPassThrough: a server without tracing whose handler calls on with
// its context passes the traceparent and baggage it was given to the next
// server.
func TestPassThrough(t *testing.T) {
	tp, sr := recorder(t)
	regB := handler.NewRegistry()
	regB.Use(otelrpcd.Middleware(tp))
	seenc := make(chan string, 1)
	bagc := make(chan string, 1)
	regB.Handle("B/Leaf", handler.Func(func(ctx context.Context, _ struct{}) (string, error) {
		v, _ := handler.CallFrom(ctx).Metadata.Get(proto.MetaTraceParent)
		seenc <- string(v)
		bagc <- baggage.FromContext(ctx).Member("tenant").Value()
		return "leaf", nil
	}))
	_, toB := start(t, regB)

	regA := handler.NewRegistry() // no tracer
	regA.Handle("A/Hop", handler.Func(func(ctx context.Context, _ struct{}) (string, error) {
		var s string
		err := toB.Call(ctx, "B/Leaf", nil, &s)
		return s, err
	}), handler.Blocking())
	_, toA := start(t, regA)

	const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var leaf string
	ctx = client.WithMetadata(client.WithMetadata(ctx, proto.MetaTraceParent, traceparent), proto.MetaBaggage, "tenant=acme")
	if err := toA.Call(ctx, "A/Hop", nil, &leaf); err != nil {
		t.Fatal(err)
	}
	if seen := <-seenc; seen != traceparent {
		t.Errorf("B saw traceparent %q, want %q passed through A", seen, traceparent)
	}
	if tenant := <-bagc; tenant != "acme" {
		t.Errorf("B's handler has baggage tenant %q, want acme passed through A", tenant)
	}
	leafSpan := spanNamed(t, sr, "B/Leaf")
	if got := leafSpan.Parent().SpanID().String(); got != "b7ad6b7169203331" {
		t.Errorf("B/Leaf's parent %s, want b7ad6b7169203331", got)
	}
	if got := leafSpan.SpanContext().TraceID().String(); got != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("B/Leaf's trace %s", got)
	}
}

// TestGatewayTraceparent: a traceparent header sent to the gateway is the
// parent of the span the middleware makes.
func TestGatewayTraceparent(t *testing.T) {
	tp, sr := recorder(t)
	reg := handler.NewRegistry()
	reg.Use(otelrpcd.Middleware(tp))
	builtin.Register(reg)
	srv := httptest.NewServer(gateway.New(reg, gateway.Options{}))
	defer srv.Close()
	hc := &http.Client{Timeout: waitLimit, Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/rpc/Math/Sum", strings.NewReader(`{"a":1,"b":2}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	s := spanNamed(t, sr, "Math/Sum")
	if s.Parent().SpanID().String() != "b7ad6b7169203331" || s.SpanContext().TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("span parent %v trace %v", s.Parent().SpanID(), s.SpanContext().TraceID())
	}
}

// TestNoTracer: with no tracer provider the middleware returns the
// handler itself, and no call is traced.
func TestNoTracer(t *testing.T) {
	h := &countHandler{}
	if got := otelrpcd.Middleware(nil)(h); got != handler.Handler(h) {
		t.Errorf("Middleware(nil) wrapped the handler: %T", got)
	}
	if ctx := context.Background(); otelrpcd.Inject(ctx) != ctx {
		t.Error("Inject without a span changed the context")
	}
}

type countHandler struct{ n int }

func (h *countHandler) ServeRPC(_ context.Context, _, reply []byte) ([]byte, error) {
	h.n++
	return reply, nil
}

// TestUntracedCallAllocs: with the middleware installed and no tracer, a
// raw call over loopback (client and server) allocates nothing, as without
// it.
func TestUntracedCallAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items")
	}
	reg := handler.NewRegistry()
	reg.Use(otelrpcd.Middleware(nil))
	builtin.Register(reg)
	_, c := start(t, reg)
	ctx := context.Background()
	req, reply := make([]byte, 16), make([]byte, 0, 64)
	for range 100 {
		reply, _ = c.CallRaw(ctx, builtin.EchoPacket, req, reply[:0])
	}
	allocs := testing.AllocsPerRun(2000, func() {
		var err error
		if reply, err = c.CallRaw(ctx, builtin.EchoPacket, req, reply[:0]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.2f allocations per raw call with the middleware and no tracer, want 0", allocs)
	}
}

// TestClientSpans: a client with Interceptor makes a client span for each
// call, the child of the span in the caller's context, and the server's
// span is the client span's child; a failed call's client span has the
// code as its status; with a nil provider the interceptor passes calls on.
func TestClientSpans(t *testing.T) {
	tp, sr := recorder(t)
	reg := handler.NewRegistry()
	reg.Use(otelrpcd.Middleware(tp))
	reg.Handle("A/Ok", handler.Func(func(context.Context, struct{}) (int, error) { return 1, nil }))
	reg.Handle("A/Missing", handler.Func(func(context.Context, struct{}) (int, error) {
		return 0, handler.Errorf(proto.CodeNotFound, "no such thing")
	}))
	s, _ := start(t, reg)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	c, err := client.Dial(ctx, s.Addr().String(), client.Options{Interceptors: []client.Interceptor{otelclient.Interceptor(tp)}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	ctx, root := tp.Tracer("test").Start(ctx, "root")
	var n int
	if err := c.Call(ctx, "A/Ok", nil, &n); err != nil || n != 1 {
		t.Fatalf("A/Ok: %d, %v", n, err)
	}
	if err := c.Call(ctx, "A/Missing", nil, nil); !errors.Is(err, handler.ErrNotFound) {
		t.Fatalf("A/Missing: %v", err)
	}
	root.End()

	byKind := func(name string) (cl, srv sdktrace.ReadOnlySpan) {
		for _, sp := range sr.Ended() {
			switch {
			case sp.Name() != name:
			case sp.SpanKind() == trace.SpanKindClient:
				cl = sp
			case sp.SpanKind() == trace.SpanKindServer:
				srv = sp
			}
		}
		if cl == nil || srv == nil {
			t.Fatalf("%s: client span %v, server span %v", name, cl != nil, srv != nil)
		}
		return cl, srv
	}
	cl, srv := byKind("A/Ok")
	rootSC := root.SpanContext()
	if cl.Parent().SpanID() != rootSC.SpanID() || cl.SpanContext().TraceID() != rootSC.TraceID() {
		t.Errorf("the client span's parent %v, want the root %v", cl.Parent().SpanID(), rootSC.SpanID())
	}
	if srv.Parent().SpanID() != cl.SpanContext().SpanID() || !srv.Parent().IsRemote() {
		t.Errorf("the server span's parent %v, want the client span %v", srv.Parent().SpanID(), cl.SpanContext().SpanID())
	}
	if v, _ := attr(cl, otelrpcd.AttrMethod); v.AsString() != "Ok" || cl.Status().Code != codes.Unset {
		t.Errorf("the client span: method %q, status %v", v.AsString(), cl.Status())
	}
	missing, _ := byKind("A/Missing")
	if st := missing.Status(); st.Code != codes.Error || st.Description != "not found: no such thing" {
		t.Errorf("A/Missing's client span: status %+v", st)
	}

	plain, err := client.Dial(ctx, s.Addr().String(), client.Options{Interceptors: []client.Interceptor{otelclient.Interceptor(nil)}})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.Call(context.Background(), "A/Ok", nil, &n); err != nil || n != 1 {
		t.Errorf("through Interceptor(nil): %d, %v", n, err)
	}
}

// TestBaggage: W3C baggage travels with calls as trace context does. A
// caller's OpenTelemetry baggage goes out under the metadata key baggage
// (Inject); a traced server's handler has it in its context; the calls it
// makes with its context carry it on, with its span as their parent; the
// gateway's baggage header arrives the same way; and Inject carries
// baggage without a span.
func TestBaggage(t *testing.T) {
	tp, sr := recorder(t)
	type seen struct{ meta, tenant string }
	leafc := make(chan seen, 4)
	regB := handler.NewRegistry()
	regB.Use(otelrpcd.Middleware(tp))
	regB.Handle("B/Leaf", handler.Func(func(ctx context.Context, _ struct{}) (string, error) {
		v, _ := handler.CallFrom(ctx).Metadata.Get(proto.MetaBaggage)
		leafc <- seen{string(v), baggage.FromContext(ctx).Member("tenant").Value()}
		return "leaf", nil
	}))
	_, toB := start(t, regB)

	regA := handler.NewRegistry()
	regA.Use(otelrpcd.Middleware(tp))
	hopc := make(chan string, 4)
	regA.Handle("A/Hop", handler.Func(func(ctx context.Context, _ struct{}) (string, error) {
		hopc <- baggage.FromContext(ctx).Member("tenant").Value()
		var s string
		err := toB.Call(ctx, "B/Leaf", nil, &s)
		return s, err
	}), handler.Blocking())
	builtin.Register(regA)
	_, toA := start(t, regA)

	member, _ := baggage.NewMember("tenant", "acme")
	bag, _ := baggage.New(member)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	ctx, root := tp.Tracer("test").Start(baggage.ContextWithBaggage(ctx, bag), "root")
	var leaf string
	if err := toA.Call(otelrpcd.Inject(ctx), "A/Hop", nil, &leaf); err != nil {
		t.Fatal(err)
	}
	root.End()
	if tenant := <-hopc; tenant != "acme" {
		t.Errorf("A's handler has baggage tenant %q, want acme", tenant)
	}
	if got := <-leafc; got.meta != "tenant=acme" || got.tenant != "acme" {
		t.Errorf("B got baggage metadata %q and tenant %q; want tenant=acme and acme, from A's context", got.meta, got.tenant)
	}
	hop, leafSpan := spanNamed(t, sr, "A/Hop"), spanNamed(t, sr, "B/Leaf")
	if hop.Parent().SpanID() != root.SpanContext().SpanID() || leafSpan.Parent().SpanID() != hop.SpanContext().SpanID() {
		t.Errorf("spans: A/Hop's parent %v (root %v), B/Leaf's %v (A/Hop %v)", hop.Parent().SpanID(), root.SpanContext().SpanID(), leafSpan.Parent().SpanID(), hop.SpanContext().SpanID())
	}

	// Baggage without a span: Inject carries it alone.
	bctx := otelrpcd.Inject(baggage.ContextWithBaggage(context.Background(), bag))
	if err := toB.Call(bctx, "B/Leaf", nil, &leaf); err != nil {
		t.Fatal(err)
	}
	if got := <-leafc; got.meta != "tenant=acme" || got.tenant != "acme" {
		t.Errorf("with baggage and no span: B got %q and tenant %q", got.meta, got.tenant)
	}

	// Through the gateway: the header, repeated, becomes the call's baggage.
	srv := httptest.NewServer(gateway.New(regA, gateway.Options{}))
	defer srv.Close()
	hc := &http.Client{Timeout: waitLimit, Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/rpc/A/Hop", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add("baggage", "region=eu")
	req.Header.Add("baggage", "tenant=globex")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if tenant := <-hopc; tenant != "globex" {
		t.Errorf("through the gateway, A's handler has tenant %q, want globex", tenant)
	}
	if got := <-leafc; got.tenant != "globex" || !strings.Contains(got.meta, "tenant=globex") || !strings.Contains(got.meta, "region=eu") {
		t.Errorf("through the gateway, B got %q and tenant %q", got.meta, got.tenant)
	}
}
