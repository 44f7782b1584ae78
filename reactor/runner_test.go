package reactor_test

import (
	"bytes"
	"context"
	stdjson "encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/gateway"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// runLimit is the frame limit of TestRunnerEveryPath's every end.
const runLimit = 32 << 10

// runRoutes registers, on reg, routes that fail in each way a call can:
// a panic, a reply over the frame limit, an error with a code marked
// unprocessed; and stream routes that panic and fail.
func runRoutes(reg *handler.Registry, opts ...handler.RouteOption) *handler.Registry {
	reg.HandleFunc("Run/Panic", func(context.Context, []byte, []byte) ([]byte, error) { panic("boom") }, opts...)
	reg.HandleFunc("Run/Big", func(_ context.Context, _, reply []byte) ([]byte, error) {
		return append(reply, make([]byte, runLimit)...), nil
	}, opts...)
	reg.HandleFunc("Run/Fail", func(context.Context, []byte, []byte) ([]byte, error) {
		return nil, &handler.Error{Code: proto.CodePermissionDenied, Message: "not you", Unprocessed: true}
	}, opts...)
	reg.HandleStream("Run/PanicStream", func(context.Context, handler.Stream) error { panic("stream boom") })
	reg.HandleStream("Run/FailStream", func(context.Context, handler.Stream) error {
		return &handler.Error{Code: proto.CodePermissionDenied, Message: "not you"}
	})
	return reg
}

// outcome is a call's failure as its caller sees it.
type outcome struct {
	Code        proto.Code `json:"code"`
	Message     string     `json:"message"`
	Unprocessed bool       `json:"unprocessed"`
}

func outcomeOf(err error) outcome {
	return outcome{handler.CodeOf(err), handler.MessageOf(err), handler.IsUnprocessed(err)}
}

// readStream opens route on o, sends nothing and reads to the stream's
// end, returning how it ended.
func readStream(ctx context.Context, o handler.StreamOpener, route string) error {
	st, err := o.OpenStream(ctx, route)
	if err != nil {
		return err
	}
	defer st.Close()
	st.CloseSend()
	_, err = io.ReadAll(st)
	return err
}

// TestRunnerEveryPath: the six paths a call can take (the event loop, the
// blocking pool, a server's stream, the HTTP gateway, a client serving its
// server's calls, and its streams) answer a panic, a reply over the frame
// limit and an error with its code alike, as transport.Runner does for them
// all: the same code, message and unprocessed mark, a panic logged once
// with its route and stack at the end that ran it, and the server's
// failures counted in its Stats.
func TestRunnerEveryPath(t *testing.T) {
	var serverLogs, poolLogs, clientLogs, gatewayLogs syncBuffer
	logger := func(b *syncBuffer) *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }
	lim := proto.Limits{MaxFrameSize: runLimit}

	reg := runRoutes(handler.NewRegistry())
	// Routes through which the server calls its client and opens its
	// client's streams, answering the outcome as JSON.
	reg.Handle("Ask/Call", handler.Func(func(ctx context.Context, route string) (outcome, error) {
		_, err := handler.CallFrom(ctx).Peer.CallRaw(ctx, route, nil, nil)
		return outcomeOf(err), nil
	}), handler.Blocking())
	reg.Handle("Ask/Stream", handler.Func(func(ctx context.Context, route string) (outcome, error) {
		err := readStream(ctx, handler.CallFrom(ctx).Peer.(handler.StreamOpener), route)
		return outcomeOf(err), nil
	}), handler.Blocking())
	s := start(t, reg, reactor.Options{Limits: lim, Logger: logger(&serverLogs)})
	pool := start(t, runRoutes(handler.NewRegistry(), handler.Blocking()), reactor.Options{Limits: lim, Logger: logger(&poolLogs)})
	gw := httptest.NewServer(gateway.New(reg, gateway.Options{Limits: lim, Logger: logger(&gatewayLogs)}))
	t.Cleanup(gw.Close)
	c := dial(t, s, client.Options{Limits: lim, Handler: runRoutes(handler.NewRegistry()), Logger: logger(&clientLogs)})
	cp := dial(t, pool, client.Options{Limits: lim})
	ctx := ctxT(t)

	raw := func(c *client.Client) func(route string) outcome {
		return func(route string) outcome {
			_, err := c.CallRaw(ctx, route, nil, nil)
			return outcomeOf(err)
		}
	}
	ask := func(via string) func(route string) outcome {
		return func(route string) outcome {
			var o outcome
			if err := c.Call(ctx, via, route, &o); err != nil {
				t.Fatalf("%s %s: %v", via, route, err)
			}
			return o
		}
	}
	viaGateway := func(route string) outcome {
		resp, err := http.Post(gw.URL+"/rpc/"+route, gateway.ContentRaw, bytes.NewReader(nil))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Code        string `json:"code"`
			Message     string `json:"message"`
			Unprocessed bool   `json:"unprocessed"`
		}
		if err := stdjson.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		o := outcome{Message: body.Message, Unprocessed: body.Unprocessed}
		for code := proto.Code(0); code < 20; code++ {
			if gateway.CodeName(code) == body.Code {
				o.Code = code
			}
		}
		if want := gateway.HTTPStatus(o.Code); resp.StatusCode != want {
			t.Errorf("gateway %s: HTTP %d, want %d for %v", route, resp.StatusCode, want, o.Code)
		}
		return o
	}
	stream := func(route string) outcome { return outcomeOf(readStream(ctx, c, route)) }

	paths := []struct {
		name    string
		call    func(route string) outcome
		streams bool
	}{
		{"event loop", raw(c), false},
		{"blocking pool", raw(cp), false},
		{"HTTP gateway", viaGateway, false},
		{"client serving its server's call", ask("Ask/Call"), false},
		{"server's stream", stream, true},
		{"client serving its server's stream", ask("Ask/Stream"), true},
	}
	want := map[string]outcome{
		"Run/Panic":       {proto.CodeInternal, "handler for Run/Panic panicked: boom", false},
		"Run/Big":         {proto.CodeResourceExhausted, fmt.Sprintf("reply of %d bytes exceeds the frame limit of %d", proto.HeaderSize+runLimit, runLimit), false},
		"Run/Fail":        {proto.CodePermissionDenied, "not you", true},
		"Run/PanicStream": {proto.CodeInternal, "handler for Run/PanicStream panicked: stream boom", false},
		"Run/FailStream":  {proto.CodePermissionDenied, "not you", false},
	}
	for _, p := range paths {
		routes := []string{"Run/Panic", "Run/Big", "Run/Fail"}
		if p.streams {
			routes = []string{"Run/PanicStream", "Run/FailStream"}
		}
		for _, route := range routes {
			if got := p.call(route); got != want[route] {
				t.Errorf("%s, %s: %+v\nwant %+v", p.name, route, got, want[route])
			}
		}
	}

	// Each panic is logged once, with its route and stack, by the end
	// that ran it.
	for _, l := range []struct {
		name   string
		logs   *syncBuffer
		routes map[string]int
	}{
		{"server", &serverLogs, map[string]int{"Run/Panic": 1, "Run/PanicStream": 1}},
		{"pool server", &poolLogs, map[string]int{"Run/Panic": 1}},
		{"gateway", &gatewayLogs, map[string]int{"Run/Panic": 1}},
		{"client", &clientLogs, map[string]int{"Run/Panic": 1, "Run/PanicStream": 1}},
	} {
		log := l.logs.String()
		for route, n := range l.routes {
			if got := strings.Count(log, `msg="rpcd: handler panicked" route=`+route+" remote="); got != n {
				t.Errorf("the %s logged %d panics of %s, want %d:\n%s", l.name, got, route, n, log)
			}
		}
		if got := strings.Count(log, "rpcd: handler panicked"); got != len(l.routes) || !strings.Contains(log, "runtime/debug.Stack") {
			t.Errorf("the %s logged %d panics, want %d, with their stacks:\n%s", l.name, got, len(l.routes), log)
		}
	}

	// The servers count what they answered with an Error: the calls and
	// the server's streams.
	for _, sc := range []struct {
		name string
		s    *reactor.Server
		want map[proto.Code]uint64
	}{
		{"server", s, map[proto.Code]uint64{proto.CodeInternal: 2, proto.CodeResourceExhausted: 1, proto.CodePermissionDenied: 2}},
		{"pool server", pool, map[proto.Code]uint64{proto.CodeInternal: 1, proto.CodeResourceExhausted: 1, proto.CodePermissionDenied: 1}},
	} {
		st := sc.s.Stats()
		for code, n := range sc.want {
			if got := st.Errors[transport.CodeSlot(code)]; got != n {
				t.Errorf("%s counted %d %v errors, want %d", sc.name, got, code, n)
			}
		}
	}
}
