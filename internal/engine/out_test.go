package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/proto"
)

// TestHeader: a call the limits refuse is refused unsent (Unprocessed),
// with the code that says why; one they take gets its metadata and the
// Deadline field, rounded up.
func TestHeader(t *testing.T) {
	lim := proto.Limits{MaxFrameSize: 1 << 10, MaxRoute: 16, MaxMetadata: 64}.WithDefaults()
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		route   string
		payload int
		code    proto.Code
	}{
		{"bad route", context.Background(), "has space", 0, proto.CodeInvalidArgument},
		{"route past the limit", context.Background(), "Controller/" + strings.Repeat("a", 16), 0, proto.CodeInvalidArgument},
		{"metadata past the limit", handler.WithMetadata(context.Background(), "k", strings.Repeat("v", 64)), "A/B", 0, proto.CodeResourceExhausted},
		{"frame past the limit", context.Background(), "A/B", 1 << 10, proto.CodeResourceExhausted},
		{"frame past the limit, with metadata", handler.WithMetadata(context.Background(), "k", "v"), "A/B", 1 << 10, proto.CodeResourceExhausted},
		{"deadline passed", expired, "A/B", 0, proto.CodeDeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Header(tc.ctx, proto.KindRequest, proto.CodecRaw, tc.route, make([]byte, tc.payload), &lim)
			if handler.CodeOf(err) != tc.code || !handler.IsUnprocessed(err) {
				t.Fatalf("err %v, want %v, Unprocessed", err, tc.code)
			}
		})
	}

	ctx, cancel := context.WithTimeout(handler.WithMetadata(context.Background(), "tenant", "acme"), 1500*time.Microsecond+time.Hour)
	defer cancel()
	h, md, err := Header(ctx, proto.KindOneWay, proto.CodecJSON, "A/B", nil, &lim)
	if err != nil {
		t.Fatal(err)
	}
	if h.Kind != proto.KindOneWay || h.Codec != proto.CodecJSON {
		t.Errorf("header %+v", h)
	}
	if v, _ := md.Get("tenant"); string(v) != "acme" {
		t.Errorf("metadata %q, want tenant=acme", md)
	}
	if want := uint32(time.Hour/time.Millisecond) + 1; h.Deadline != want && h.Deadline != want+1 {
		t.Errorf("Deadline field %d, want %d rounded up", h.Deadline, want)
	}
	if h, _, _ := Header(context.Background(), proto.KindRequest, proto.CodecRaw, "A/B", nil, &lim); h.Deadline != 0 {
		t.Errorf("Deadline field %d without a deadline, want 0", h.Deadline)
	}
}

// TestAnswer: a Response's payload is appended to the reply, expanded if
// compressed; one that does not expand is DataLoss; an Error becomes its
// code and message, Unprocessed as its flag says.
func TestAnswer(t *testing.T) {
	decode := func(b []byte) *proto.Frame {
		t.Helper()
		lim := proto.Limits{}.WithDefaults()
		f, _, err := proto.Decode(b, &lim)
		if err != nil {
			t.Fatal(err)
		}
		return &f
	}
	reply, err := Answer(decode(proto.AppendFrame(nil, proto.Header{Kind: proto.KindResponse, ID: 1}, "", nil, []byte("world"))), []byte("hello "), 1<<20)
	if err != nil || string(reply) != "hello world" {
		t.Fatalf("Response: %q, %v", reply, err)
	}

	plain := []byte(strings.Repeat("compressible ", 100))
	z := compression.Append(nil, plain, proto.CompressionGzip)
	zf := proto.AppendFrame(nil, proto.Header{Kind: proto.KindResponse, ID: 1}, "", nil, z)
	proto.SetCompression(zf, proto.CompressionGzip)
	if reply, err = Answer(decode(zf), nil, 1<<20); err != nil || string(reply) != string(plain) {
		t.Fatalf("compressed Response: %d bytes, %v", len(reply), err)
	}
	if _, err = Answer(decode(zf), nil, proto.HeaderSize+100); handler.CodeOf(err) != proto.CodeDataLoss {
		t.Fatalf("Response past the limit once expanded: %v, want DataLoss", err)
	}

	_, err = Answer(decode(proto.AppendError(nil, 1, proto.FlagUnprocessed, proto.CodeNotFound, "no route A/B")), nil, 1<<20)
	var e *handler.Error
	if !errors.As(err, &e) || e.Code != proto.CodeNotFound || e.Message != "no route A/B" || !e.Unprocessed {
		t.Fatalf("Error: %#v", err)
	}
	if _, err = Answer(decode(proto.AppendError(nil, 1, 0, proto.CodeInternal, "boom")), nil, 1<<20); handler.IsUnprocessed(err) {
		t.Fatalf("Error without the flag: %v is Unprocessed", err)
	}
}

// TestContextError: a deadline is DeadlineExceeded, anything else Canceled;
// neither is Unprocessed (the call may have run).
func TestContextError(t *testing.T) {
	if err := ContextError(context.DeadlineExceeded, "A/B"); handler.CodeOf(err) != proto.CodeDeadlineExceeded || handler.IsUnprocessed(err) {
		t.Errorf("deadline: %v", err)
	}
	if err := ContextError(context.Canceled, "A/B"); handler.CodeOf(err) != proto.CodeCanceled || handler.IsUnprocessed(err) {
		t.Errorf("cancel: %v", err)
	}
}

// BenchmarkHeader: the header of a call on a context with nothing to carry,
// as the client builds one per call.
func BenchmarkHeader(b *testing.B) {
	lim := proto.Limits{}.WithDefaults()
	ctx := context.Background()
	payload := make([]byte, 16)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Header(ctx, proto.KindRequest, proto.CodecRaw, "Bench/EchoPacket", payload, &lim); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRouteCheck: a RouteCheck refuses what CheckRoute and CheckSize
// refuse, from its zero value on (an empty route too), whether its last
// route passed or not: a payload too large for the route it passed, a bad
// route after a good one, a good route after a bad one's refusal; and a
// payload one byte within the frame passes.
func TestRouteCheck(t *testing.T) {
	lim := proto.Limits{MaxFrameSize: 1024}.WithDefaults()
	room := lim.MaxFrameSize - proto.HeaderSize - len("A/B")
	var r RouteCheck
	for i, tc := range []struct {
		route   string
		payload int
		code    proto.Code // 0: passes
	}{
		{"", 0, proto.CodeInvalidArgument},
		{"A/B", room, 0},
		{"A/B", room, 0},
		{"A/B", room + 1, proto.CodeResourceExhausted},
		{"A/B", 0, 0},
		{"bad route", 0, proto.CodeInvalidArgument},
		{"A/B", 1, 0},
		{"Long/Route", room - 7, 0}, // its room is 7 bytes less than A/B's
		{"Long/Route", room - 6, proto.CodeResourceExhausted},
	} {
		payload := make([]byte, tc.payload)
		if r.Fits(tc.route, payload) && tc.code != 0 {
			t.Fatalf("check %d, %q with %d bytes: Fits, want code %v", i, tc.route, tc.payload, tc.code)
		}
		err := r.Check(tc.route, payload, &lim)
		if got := handler.CodeOf(err); (tc.code == 0) != (err == nil) || err != nil && got != tc.code {
			t.Fatalf("check %d, %q with %d bytes: %v, want code %v", i, tc.route, tc.payload, err, tc.code)
		}
		if err == nil && !r.Fits(tc.route, payload) {
			t.Fatalf("check %d, %q with %d bytes: passed, and then does not fit", i, tc.route, tc.payload)
		}
	}
}
