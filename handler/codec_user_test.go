package handler_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/internal/gobcodec"
	"github.com/rpcd/rpcd/proto"
)

var registerGob sync.Once

// mustPanic reports whether f panics.
func mustPanic(f func()) (panicked bool) {
	defer func() { panicked = recover() != nil }()
	f()
	return false
}

// TestRegisterCodec: a typed route takes a call in a registered codec and
// answers in it; an id no one registered is refused, unprocessed, without
// running the handler; RegisterCodec refuses ids that are not an
// application's, and an id another codec has taken, but takes the same
// codec again.
func TestRegisterCodec(t *testing.T) {
	registerGob.Do(func() { handler.RegisterCodec(gobcodec.Codec(proto.CodecUser)) })
	if mustPanic(func() { handler.RegisterCodec(gobcodec.Codec(proto.CodecUser)) }) {
		t.Error("RegisterCodec refused the same codec again")
	}
	if !mustPanic(func() { handler.RegisterCodec(idCodec(proto.CodecUser)) }) {
		t.Error("RegisterCodec gave id 0x80 to a second codec")
	}
	for _, id := range []proto.Codec{proto.CodecRaw, proto.CodecJSON, 0x02, 0x7f} {
		if !mustPanic(func() { handler.RegisterCodec(idCodec(id)) }) {
			t.Errorf("RegisterCodec took id %v", id)
		}
	}

	ran := 0
	h := handler.Func(func(_ context.Context, in sumArgs) (int, error) { ran++; return in.A + in.B, nil })
	req, err := transport.AppendArgWith(gobcodec.Codec(proto.CodecUser), nil, sumArgs{A: 2, B: 40})
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.ServeRPC(&handler.Call{Route: "Math/Sum", Codec: proto.CodecUser}, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	var sum int
	if err := transport.DecodeReplyWith(gobcodec.Codec(proto.CodecUser), "Math/Sum", out, &sum); err != nil || sum != 42 {
		t.Fatalf("reply in the codec: %d, %v; want 42", sum, err)
	}
	if err := transport.DecodeReplyWith(handler.JSON, "Math/Sum", out, &sum); err == nil {
		t.Error("a gob reply decoded as JSON")
	}
	before := ran
	_, err = h.ServeRPC(&handler.Call{Route: "Math/Sum", Codec: proto.CodecUser + 1}, req, nil)
	if !errors.Is(err, handler.ErrInvalidArgument) || !handler.IsUnprocessed(err) || !strings.Contains(err.Error(), "Codec(0x81)") {
		t.Errorf("an unregistered codec: %v", err)
	}
	if ran != before {
		t.Error("the handler ran for a codec no one registered")
	}
}

// sumArgs is Math/Sum's argument, as handler_test.go has it.
type sumArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

// idCodec is a codec that only has an id.
type idCodec proto.Codec

func (c idCodec) ID() proto.Codec                        { return proto.Codec(c) }
func (idCodec) Append(dst []byte, _ any) ([]byte, error) { return dst, nil }
func (idCodec) Unmarshal([]byte, any) error              { return nil }
