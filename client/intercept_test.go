package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/reactor"
)

// interceptServer serves T/Meta, which answers the metadata value "who"
// of its call, T/Count, which counts its calls (one-way ones too), and
// the built-in routes.
func interceptServer(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	reg := handler.NewRegistry()
	builtin.Register(reg)
	reg.HandleFunc("T/Meta", func(ctx context.Context, _, reply []byte) ([]byte, error) {
		who, _ := handler.CallFrom(ctx).Metadata.Get("who")
		return append(reply, who...), nil
	})
	reg.HandleFunc("T/Count", func(_ context.Context, req, reply []byte) ([]byte, error) {
		n.Add(1)
		return append(reply, req...), nil
	})
	s := reactor.New(reg, reactor.Options{Loops: 1})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, s) })
	return s.Addr().String(), &n
}

// recorder is an interceptor that logs what it sees, around next.
type recorder struct {
	name string
	mu   *sync.Mutex
	log  *[]string
}

func (r recorder) intercept(ctx context.Context, info *client.CallInfo, req, reply []byte, next client.Invoker) ([]byte, error) {
	r.mu.Lock()
	*r.log = append(*r.log, fmt.Sprintf("%s>%s %v %v", r.name, info.Route, info.Codec, info.OneWay))
	r.mu.Unlock()
	out, err := next(ctx, req, reply)
	r.mu.Lock()
	*r.log = append(*r.log, fmt.Sprintf("<%s %v", r.name, err))
	r.mu.Unlock()
	return out, err
}

// TestInterceptors: a Client's and a Cluster's interceptors wrap each of
// their calls once, the first outermost, told the route, the codec and
// whether a reply comes, for Call, CallRaw, Notify, NotifyRaw, Go and
// GoRaw; one may give the call another context (metadata reaches the
// server), answer it itself (nothing reaches the server), or fail it.
func TestInterceptors(t *testing.T) {
	addr, count := interceptServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var mu sync.Mutex
	var log []string
	a, b := recorder{"a", &mu, &log}, recorder{"b", &mu, &log}
	opts := client.Options{Interceptors: []client.Interceptor{a.intercept, b.intercept}}
	c := dial(t, addr, opts)
	k := dialService(t, "static://"+addr+"/svc", client.ServiceOptions{Options: opts})
	for _, via := range []struct {
		name string
		s    interface {
			Call(ctx context.Context, route string, in, out any) error
			CallRaw(ctx context.Context, route string, req, reply []byte) ([]byte, error)
			Notify(ctx context.Context, route string, in any) error
			NotifyRaw(ctx context.Context, route string, req []byte) error
			Go(ctx context.Context, route string, in, out any) *client.Future
			GoRaw(ctx context.Context, route string, req []byte) *client.Future
		}
	}{{"Client", c}, {"Cluster", k}} {
		log = nil
		var sum int
		if err := via.s.Call(ctx, builtin.Sum, builtin.SumArgs{A: 1, B: 2}, &sum); err != nil || sum != 3 {
			t.Fatalf("%s Call: %d, %v", via.name, sum, err)
		}
		if got, err := via.s.CallRaw(ctx, "T/Count", []byte("x"), nil); err != nil || string(got) != "x" {
			t.Fatalf("%s CallRaw: %q, %v", via.name, got, err)
		}
		if err := via.s.Notify(ctx, "T/Count", 1); err != nil {
			t.Fatal(err)
		}
		if err := via.s.NotifyRaw(ctx, "T/Count", []byte("y")); err != nil {
			t.Fatal(err)
		}
		sum = 0
		if err := via.s.Go(ctx, builtin.Sum, builtin.SumArgs{A: 2, B: 2}, &sum).Wait(); err != nil || sum != 4 {
			t.Fatalf("%s Go: %d, %v", via.name, sum, err)
		}
		req := []byte("z")
		f := via.s.GoRaw(ctx, "T/Count", req)
		req[0] = '!' // GoRaw's req may be reused once it returns
		if err := f.Wait(); err != nil || string(f.Reply()) != "z" {
			t.Fatalf("%s GoRaw: %q, %v", via.name, f.Reply(), err)
		}
		want := []string{
			"a>Math/Sum json false", "b>Math/Sum json false", "<b <nil>", "<a <nil>",
			"a>T/Count raw false", "b>T/Count raw false", "<b <nil>", "<a <nil>",
			"a>T/Count json true", "b>T/Count json true", "<b <nil>", "<a <nil>",
			"a>T/Count raw true", "b>T/Count raw true", "<b <nil>", "<a <nil>",
			"a>Math/Sum json false", "b>Math/Sum json false", "<b <nil>", "<a <nil>",
			"a>T/Count raw false", "b>T/Count raw false", "<b <nil>", "<a <nil>",
		}
		mu.Lock()
		if !slices.Equal(log, want) {
			t.Errorf("%s: the interceptors saw\n%q\nwant\n%q", via.name, log, want)
		}
		mu.Unlock()
	}

	// Metadata added by an interceptor reaches the server.
	withWho := func(ctx context.Context, _ *client.CallInfo, req, reply []byte, next client.Invoker) ([]byte, error) {
		return next(client.WithMetadata(ctx, "who", "interceptor"), req, reply)
	}
	c2 := dial(t, addr, client.Options{Interceptors: []client.Interceptor{withWho}})
	if got, err := c2.CallRaw(ctx, "T/Meta", nil, nil); err != nil || string(got) != "interceptor" {
		t.Errorf("metadata from an interceptor: %q, %v", got, err)
	}

	// An interceptor that answers, or fails, without sending.
	cached := func(_ context.Context, info *client.CallInfo, _, reply []byte, next client.Invoker) ([]byte, error) {
		if info.Route == "T/Count" {
			return append(reply, "cached"...), nil
		}
		return reply, errors.New("refused by the interceptor")
	}
	c3 := dial(t, addr, client.Options{Interceptors: []client.Interceptor{cached}})
	before := count.Load()
	if got, err := c3.CallRaw(ctx, "T/Count", []byte("x"), nil); err != nil || string(got) != "cached" {
		t.Errorf("a cached reply: %q, %v", got, err)
	}
	if err := c3.Call(ctx, builtin.Sum, builtin.SumArgs{}, nil); err == nil || err.Error() != "refused by the interceptor" {
		t.Errorf("a refusal: %v", err)
	}
	if n := count.Load(); n != before {
		t.Errorf("the server ran %d calls an interceptor answered", n-before)
	}
}
