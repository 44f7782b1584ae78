package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/gobcodec"
	"github.com/rpcd/rpcd/proto"
)

var registerGob sync.Once

// TestCustomCodec: a client whose Options.Codec is an application's codec,
// registered on the server, sends its typed calls, futures, one-way calls
// and publishes in it and decodes the replies with it, over a real
// reactor; a codec the server does not know is refused, unprocessed; a
// codec with a reserved id is refused at Dial.
func TestCustomCodec(t *testing.T) {
	registerGob.Do(func() { handler.RegisterCodec(gobcodec.Codec(proto.CodecUser)) })
	s := server(t, "127.0.0.1:0")
	addr := s.Addr().String()
	c := dial(t, addr, client.Options{Codec: gobcodec.Codec(proto.CodecUser)})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var sum int64
	if err := c.Call(ctx, builtin.Sum, builtin.SumArgs{A: 40, B: 2}, &sum); err != nil || sum != 42 {
		t.Fatalf("Call in gob: %d, %v", sum, err)
	}
	sum = 0
	if err := c.Go(ctx, builtin.Sum, builtin.SumArgs{A: 1, B: 2}, &sum).Wait(); err != nil || sum != 3 {
		t.Fatalf("Go in gob: %d, %v", sum, err)
	}
	msgs := make(chan client.Message, 1)
	sub, err := c.Subscribe(ctx, "codec.test", msgs)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := c.Publish(ctx, "codec.test", builtin.SumArgs{A: 7}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-msgs:
		var got builtin.SumArgs
		if m.Codec != proto.CodecUser || gobcodec.Codec(0).Unmarshal(m.Payload, &got) != nil || got.A != 7 {
			t.Errorf("published message: codec %v, payload %q", m.Codec, m.Payload)
		}
	case <-ctx.Done():
		t.Fatal("no message")
	}

	other := dial(t, addr, client.Options{Codec: gobcodec.Codec(proto.CodecUser + 1)})
	err = other.Call(ctx, builtin.Sum, builtin.SumArgs{A: 1, B: 1}, &sum)
	if !errors.Is(err, handler.ErrInvalidArgument) || !handler.IsUnprocessed(err) {
		t.Errorf("a codec the server does not know: %v, want InvalidArgument, unprocessed", err)
	}
	if _, err := client.Dial(ctx, addr, client.Options{Codec: gobcodec.Codec(0x02)}); err == nil {
		t.Error("Dial took a codec with a reserved id")
	}
	if _, err := client.DialService(ctx, "static://"+addr+"/svc", client.ServiceOptions{Options: client.Options{Codec: gobcodec.Codec(proto.CodecRaw)}}); err == nil {
		t.Error("DialService took a codec with the raw id")
	}

	k := dialService(t, "static://"+addr+"/svc", client.ServiceOptions{Options: client.Options{Codec: gobcodec.Codec(proto.CodecUser)}})
	sum = 0
	if err := k.Call(ctx, builtin.Sum, builtin.SumArgs{A: 5, B: 6}, &sum); err != nil || sum != 11 {
		t.Fatalf("Cluster.Call in gob: %d, %v", sum, err)
	}
	sum = 0
	if err := k.Go(ctx, builtin.Sum, builtin.SumArgs{A: 5, B: 7}, &sum).Wait(); err != nil || sum != 12 {
		t.Fatalf("Cluster.Go in gob: %d, %v", sum, err)
	}
}
