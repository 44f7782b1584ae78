package client_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// TestPublishRefused: against a scripted server that refuses every
// Publish to secrets.* with an Error of call id 0 and answers every
// Request, a client hands each refusal to Options.PublishRefused and
// counts it; Flush returns once those of the publishes before it have
// arrived; a refusal fails no call, even one waiting as it arrives.
func TestPublishRefused(t *testing.T) {
	addr := fakeServer(t, func(nc net.Conn) {
		var buf []byte
		tmp := make([]byte, 4096)
		for {
			f, n, err := proto.Decode(buf, nil)
			if err != nil {
				t.Errorf("the client sent bytes that are not frames: %v", err)
				return
			}
			if n == 0 {
				nc.SetReadDeadline(time.Now().Add(10 * time.Second))
				k, err := nc.Read(tmp)
				if err != nil {
					return
				}
				buf = append(buf, tmp[:k]...)
				continue
			}
			var out []byte
			switch f.Kind {
			case proto.KindPublish:
				if strings.HasPrefix(string(f.Route), "secrets.") {
					out = proto.AppendError(nil, 0, proto.FlagUnprocessed, proto.CodePermissionDenied, "may not publish to "+string(f.Route))
				}
			case proto.KindRequest:
				out = proto.AppendFrame(nil, proto.Header{Kind: proto.KindResponse, ID: f.ID}, "", nil, []byte("ok"))
			}
			buf = buf[n:]
			if out != nil {
				if _, err := nc.Write(out); err != nil {
					return
				}
			}
		}
	})
	var mu sync.Mutex
	var refused []error
	c := dial(t, addr, client.Options{Conns: 2, PublishRefused: func(err error) {
		mu.Lock()
		refused = append(refused, err)
		mu.Unlock()
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, topic := range []string{"orders.eu", "secrets.payroll", "chat.x", "secrets.keys"} {
		if err := c.PublishRaw(ctx, topic, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if reply, err := c.CallRaw(ctx, "Any/Route", nil, nil); err != nil || string(reply) != "ok" {
		t.Fatalf("a call beside the refusals: %q, %v", reply, err)
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := append([]error(nil), refused...)
	mu.Unlock()
	if len(got) != 2 || c.RefusedPublishes() != 2 {
		t.Fatalf("refusals %v, counted %d; want 2", got, c.RefusedPublishes())
	}
	var msgs []string
	for _, err := range got {
		var he *handler.Error
		if !errors.As(err, &he) || he.Code != proto.CodePermissionDenied || !he.Unprocessed {
			t.Fatalf("refusal %#v", err)
		}
		msgs = append(msgs, he.Message)
	}
	if strings.Join(msgs, ",") != "may not publish to secrets.payroll,may not publish to secrets.keys" &&
		strings.Join(msgs, ",") != "may not publish to secrets.keys,may not publish to secrets.payroll" { // two connections
		t.Fatalf("refusals %q", msgs)
	}

	c.Close()
	if err := c.Flush(ctx); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Flush after Close: %v", err)
	}
}
