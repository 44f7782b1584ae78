package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/servertest"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// TestEncoded: CallEncodedAsync, NotifyEncoded and PublishEncoded label
// their payloads with the codec given, which the server's handler (and a
// subscriber) sees, with the payload and metadata as sent; a typed route
// decodes a JSON payload sent this way.
func TestEncoded(t *testing.T) {
	reg := handler.NewRegistry()
	seen := make(chan string, 4)
	note := func(ctx context.Context, req []byte) string {
		call := handler.CallFrom(ctx)
		v, _ := call.Metadata.Get("k")
		return fmt.Sprintf("%v %s k=%s", call.Codec, req, v)
	}
	reg.HandleFunc("T/Echo", func(ctx context.Context, req, reply []byte) ([]byte, error) {
		return append(reply, note(ctx, req)...), nil
	})
	reg.HandleFunc("T/Note", func(ctx context.Context, req, reply []byte) ([]byte, error) {
		seen <- note(ctx, req)
		return reply, nil
	})
	reg.Handle("T/Double", handler.Func(func(_ context.Context, n int) (int, error) { return 2 * n, nil }))
	s := servertest.Start(t, reg, reactor.Options{})
	c := dial(t, s.Addr().String(), client.Options{})
	ctx := ctxFor(t, 10*time.Second)
	mctx := client.WithMetadata(ctx, "k", "v")

	var wg sync.WaitGroup
	got := make([]string, 3)
	errs := make([]error, 3)
	for i, codec := range []proto.Codec{proto.CodecJSON, proto.CodecRaw, proto.CodecUser + 1} {
		wg.Add(1)
		c.CallEncodedAsync(mctx, codec, "T/Echo", []byte(`"x"`), nil, func(reply []byte, err error) {
			defer wg.Done()
			got[i], errs[i] = string(reply), err
		})
	}
	wg.Add(1)
	var double string
	var doubleErr error
	c.CallEncodedAsync(ctx, proto.CodecJSON, "T/Double", []byte("21"), nil, func(reply []byte, err error) {
		defer wg.Done()
		double, doubleErr = string(reply), err
	})
	wg.Wait()
	for i, want := range []string{`json "x" k=v`, `raw "x" k=v`, `Codec(0x81) "x" k=v`} {
		if errs[i] != nil || got[i] != want {
			t.Errorf("call %d: %q, %v; want %q", i, got[i], errs[i], want)
		}
	}
	if doubleErr != nil || double != "42" {
		t.Errorf("T/Double(21) sent as JSON: %q, %v; want 42", double, doubleErr)
	}

	if err := c.NotifyEncoded(mctx, proto.CodecJSON, "T/Note", []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-seen:
		if n != "json 1 k=v" {
			t.Errorf("NotifyEncoded: the handler saw %q, want %q", n, "json 1 k=v")
		}
	case <-ctx.Done():
		t.Fatal("NotifyEncoded's call never ran")
	}

	msgs := make(chan client.Message, 1)
	sub, err := c.Subscribe(ctx, "t.>", msgs)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := c.PublishEncoded(ctx, "t.a", proto.CodecJSON, []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-msgs:
		if m.Codec != proto.CodecJSON || string(m.Payload) != `{"a":1}` {
			t.Errorf("PublishEncoded: delivered %v %q, want json {\"a\":1}", m.Codec, m.Payload)
		}
	case <-ctx.Done():
		t.Fatal("PublishEncoded's message never came")
	}
}
