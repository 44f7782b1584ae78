package handler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/proto"
)

func echo(_ context.Context, req, reply []byte) ([]byte, error) { return append(reply, req...), nil }

func TestErrorMatching(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", Errorf(proto.CodeNotFound, "no route %s", "A/B"))
	if !errors.Is(err, ErrNotFound) {
		t.Error("errors.Is(err, ErrNotFound) = false")
	}
	if errors.Is(err, ErrInternal) {
		t.Error("errors.Is(err, ErrInternal) = true")
	}
	var e *Error
	if !errors.As(err, &e) || e.Code != proto.CodeNotFound || e.Message != "no route A/B" {
		t.Errorf("errors.As gave %+v", e)
	}
	if got := e.Error(); got != "rpcd: not found: no route A/B" {
		t.Errorf("Error() = %q", got)
	}
	// A message that begins "rpcd: " (a peer's, or another error's text)
	// does not double the prefix.
	if got := (&Error{Code: proto.CodeUnknown, Message: "rpcd: a library says no"}).Error(); got != "rpcd: unknown: a library says no" {
		t.Errorf("Error() = %q, want the prefix once", got)
	}
	if !errors.Is(&Error{Code: proto.CodeDeadlineExceeded}, context.DeadlineExceeded) {
		t.Error("a DeadlineExceeded error does not match context.DeadlineExceeded")
	}
	if !errors.Is(&Error{Code: proto.CodeCanceled}, context.Canceled) {
		t.Error("a Canceled error does not match context.Canceled")
	}
	cases := []struct {
		err  error
		code proto.Code
		msg  string
	}{
		{nil, proto.CodeOK, ""},
		{errors.New("boom"), proto.CodeUnknown, "boom"},
		{context.DeadlineExceeded, proto.CodeDeadlineExceeded, "context deadline exceeded"},
		{fmt.Errorf("x: %w", context.Canceled), proto.CodeCanceled, "x: context canceled"},
		{err, proto.CodeNotFound, "no route A/B"},
		// Another rpcd error's text goes on the wire without its prefix:
		// the receiver's Error adds "rpcd: CODE: ".
		{errors.New("rpcd: a library says no"), proto.CodeUnknown, "a library says no"},
		{&Error{Code: proto.CodeInternal, Message: "rpcd: payload does not expand"}, proto.CodeInternal, "payload does not expand"},
	}
	for _, c := range cases {
		if got := CodeOf(c.err); got != c.code {
			t.Errorf("CodeOf(%v) = %v, want %v", c.err, got, c.code)
		}
		if c.err != nil && MessageOf(c.err) != c.msg {
			t.Errorf("MessageOf(%v) = %q, want %q", c.err, MessageOf(c.err), c.msg)
		}
	}
}

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	r.HandleFunc("Echo/Raw", echo)
	r.Handle("Slow/Op", HandlerFunc(echo), Blocking())
	if rt := r.Lookup([]byte("Echo/Raw")); rt == nil || rt.Name() != "Echo/Raw" || rt.IsBlocking() {
		t.Fatalf("Lookup(Echo/Raw) = %+v", rt)
	}
	if rt := r.Lookup([]byte("Slow/Op")); rt == nil || !rt.IsBlocking() {
		t.Fatal("Slow/Op is not blocking")
	}
	if r.Lookup([]byte("echo/raw")) != nil {
		t.Fatal("lookup is not case-sensitive")
	}
	got := r.Routes()
	if len(got) != 2 || got[0].Name != "Echo/Raw" || got[1].Name != "Slow/Op" || !got[1].Blocking {
		t.Fatalf("Routes() = %+v", got)
	}
	for _, bad := range []string{"", "has space", strings.Repeat("x", 257), "tab\t"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Handle(%q) did not panic", bad)
				}
			}()
			r.HandleFunc(bad, echo)
		}()
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("registering Echo/Raw twice did not panic")
			}
		}()
		r.HandleFunc("Echo/Raw", echo)
	}()
}

func TestMiddlewareOrder(t *testing.T) {
	r := NewRegistry()
	var trace []string
	mw := func(name string) Middleware {
		return func(next Handler) Handler {
			return HandlerFunc(func(ctx context.Context, req, reply []byte) ([]byte, error) {
				trace = append(trace, name+":"+CallFrom(ctx).Route)
				return next.ServeRPC(ctx, req, reply)
			})
		}
	}
	r.HandleFunc("Before/Use", echo)
	r.Use(mw("outer"), mw("inner"))
	r.HandleFunc("After/Use", echo)
	for _, route := range []string{"Before/Use", "After/Use"} {
		trace = nil
		c := &Call{Route: route}
		if _, err := r.Lookup([]byte(route)).Serve(c, []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
		if want := "outer:" + route + ",inner:" + route; strings.Join(trace, ",") != want {
			t.Errorf("%s: middleware ran %v, want %s", route, trace, want)
		}
	}
}

func TestServeAppends(t *testing.T) {
	r := NewRegistry()
	r.HandleFunc("Echo/Raw", echo)
	r.HandleFunc("Fresh/Slice", func(_ context.Context, req, _ []byte) ([]byte, error) {
		return []byte("fresh"), nil
	})
	r.HandleFunc("Fail/Late", func(_ context.Context, _, reply []byte) ([]byte, error) {
		return append(reply, "partial"...), ErrAborted
	})
	buf := make([]byte, 0, 64)
	buf = append(buf, "head|"...)
	out, err := r.Lookup([]byte("Echo/Raw")).Serve(&Call{}, []byte("abc"), buf)
	if err != nil || string(out) != "head|abc" {
		t.Fatalf("echo: %q, %v", out, err)
	}
	if &out[0] != &buf[0] {
		t.Error("echo that fits was not written in place")
	}
	out, err = r.Lookup([]byte("Fresh/Slice")).Serve(&Call{}, nil, []byte("head|"))
	if err != nil || string(out) != "head|fresh" {
		t.Fatalf("fresh slice: %q, %v", out, err)
	}
	out, err = r.Lookup([]byte("Fail/Late")).Serve(&Call{}, nil, []byte("head|"))
	if !errors.Is(err, ErrAborted) || string(out) != "head|" {
		t.Fatalf("failing handler: %q, %v; want the buffer untouched", out, err)
	}
}

// TestServeOwn: a large reply the handler did not write in place comes back
// as the handler's own slice, not copied; anything else is as Serve has it.
func TestServeOwn(t *testing.T) {
	r := NewRegistry()
	r.HandleFunc("Echo/Same", func(_ context.Context, req, _ []byte) ([]byte, error) { return req, nil })
	r.HandleFunc("Echo/Raw", echo)
	r.HandleFunc("Fail/Late", func(_ context.Context, req, _ []byte) ([]byte, error) { return req, ErrAborted })
	r.HandleFunc("Panic/Now", func(context.Context, []byte, []byte) ([]byte, error) { panic("kaboom") })
	const large = 8
	big, small := []byte("0123456789"), []byte("0123")
	head := func() []byte { return append(make([]byte, 0, 64), "head|"...) }

	out, own, err := r.Lookup([]byte("Echo/Same")).ServeOwn(&Call{}, big, head(), large)
	if err != nil || string(out) != "head|" || &own[0] != &big[0] || len(own) != len(big) {
		t.Fatalf("large reply of the handler's own: out %q, own %q, %v; want own to be the request, uncopied", out, own, err)
	}
	out, own, err = r.Lookup([]byte("Echo/Same")).ServeOwn(&Call{}, small, head(), large)
	if err != nil || string(out) != "head|0123" || own != nil {
		t.Fatalf("small reply of the handler's own: out %q, own %q, %v; want it copied", out, own, err)
	}
	buf := head()
	out, own, err = r.Lookup([]byte("Echo/Raw")).ServeOwn(&Call{}, big, buf, large)
	if err != nil || string(out) != "head|0123456789" || own != nil || &out[0] != &buf[0] {
		t.Fatalf("large reply in place: out %q, own %q, %v; want it in out", out, own, err)
	}
	for _, route := range []string{"Fail/Late", "Panic/Now"} {
		out, own, err = r.Lookup([]byte(route)).ServeOwn(&Call{}, big, head(), large)
		if err == nil || string(out) != "head|" || own != nil {
			t.Fatalf("%s: out %q, own %q, %v; want an error and nothing else", route, out, own, err)
		}
	}
	out, err = r.Lookup([]byte("Echo/Same")).Serve(&Call{}, big, head())
	if err != nil || string(out) != "head|0123456789" {
		t.Fatalf("Serve of a large reply of the handler's own: %q, %v; want it copied", out, err)
	}
}

func TestServePanic(t *testing.T) {
	r := NewRegistry()
	r.HandleFunc("Panic/Now", func(context.Context, []byte, []byte) ([]byte, error) { panic("kaboom") })
	out, err := r.Lookup([]byte("Panic/Now")).Serve(&Call{}, nil, []byte("head|"))
	if !errors.Is(err, ErrInternal) || !strings.Contains(err.Error(), "kaboom") {
		t.Fatalf("panic gave %v", err)
	}
	if string(out) != "head|" {
		t.Fatalf("buffer after panic: %q", out)
	}
}

func TestServeRawAllocs(t *testing.T) {
	r := NewRegistry()
	r.HandleFunc("Echo/Raw", echo)
	rt := r.Lookup([]byte("Echo/Raw"))
	var c Call
	req := make([]byte, 16)
	buf := make([]byte, 0, 256)
	name := []byte("Echo/Raw")
	allocs := testing.AllocsPerRun(1000, func() {
		rt := r.Lookup(name)
		c.Route, c.ID = rt.Name(), 7
		c.Start(context.Background(), time.Time{})
		buf, _ = rt.Serve(&c, req, buf[:0])
		c.End()
	})
	if allocs != 0 {
		t.Fatalf("raw serve allocates %.1f times per call, want 0", allocs)
	}
	_ = rt
}

type sumArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

func TestFunc(t *testing.T) {
	ran := 0
	h := Func(func(ctx context.Context, in sumArgs) (int, error) {
		ran++
		if in.A < 0 {
			return 0, Errorf(proto.CodeOutOfRange, "a is negative")
		}
		return in.A + in.B, nil
	})
	call := func(codec proto.Codec, payload string) (string, error) {
		c := &Call{Route: "Math/Sum", Codec: codec}
		out, err := h.ServeRPC(c, []byte(payload), nil)
		return string(out), err
	}
	if out, err := call(proto.CodecJSON, `{"a":1,"b":2}`); err != nil || out != "3" {
		t.Fatalf("sum: %q, %v", out, err)
	}
	if out, err := call(proto.CodecJSON, ""); err != nil || out != "0" {
		t.Fatalf("empty payload: %q, %v; want the zero argument", out, err)
	}
	if _, err := call(proto.CodecJSON, `{"a":-1}`); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("handler error: %v", err)
	}
	before := ran
	for _, bad := range []string{`{"a":`, `{"a":"x"}`, `[1,2]`, "\xff"} {
		if _, err := call(proto.CodecJSON, bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("payload %q: %v, want InvalidArgument", bad, err)
		}
	}
	if _, err := call(proto.CodecRaw, `{"a":1}`); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "takes json") {
		t.Errorf("raw codec: %v", err)
	}
	if ran != before {
		t.Errorf("handler ran %d times on arguments that did not decode", ran-before)
	}
}

// TestFuncCopiesStrings: decoded strings must not alias the request bytes,
// which the reactor reuses once the handler returns.
func TestFuncCopiesStrings(t *testing.T) {
	var kept string
	h := Func(func(_ context.Context, in string) (bool, error) { kept = in; return true, nil })
	req := []byte(`"original"`)
	if _, err := h.ServeRPC(&Call{Codec: proto.CodecJSON}, req, nil); err != nil {
		t.Fatal(err)
	}
	copy(req, `"XXXXXXXX"`)
	if kept != "original" {
		t.Fatalf("decoded string changed with the request buffer: %q", kept)
	}
}
