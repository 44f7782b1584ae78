package reactor_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/reactor"
)

// TestInlineHandlerCallingOut: an inline handler that calls the same
// server through a client.Client, which waits for a reply only the
// handler's own event loop could read, is refused at once with an error
// that names the route and the remedy, by each of the client's calls that
// wait; and a client on another connection of the same loop is served
// meanwhile. (Before the refusal, the loop stalled until the caller's
// deadline, and every connection on it with it.)
func TestInlineHandlerCallingOut(t *testing.T) {
	reg := builtinRegistry()
	s := start(t, reg, reactor.Options{Loops: 1}) // every connection on the one loop
	self := dial(t, s, client.Options{})          // the handlers' client of their own server
	k, err := client.DialService(ctxT(t), "static://"+s.Addr().String()+"/self", client.ServiceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })

	type outcome struct {
		err  error
		took time.Duration
	}
	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Client.Call", func(ctx context.Context) error {
			var out string
			return self.Call(ctx, builtin.EchoString, "hi", &out)
		}},
		{"Client.CallRaw", func(ctx context.Context) error {
			_, err := self.CallRaw(ctx, builtin.EchoPacket, []byte("hi"), nil)
			return err
		}},
		{"Client.Go", func(ctx context.Context) error {
			var out string
			return self.Go(ctx, builtin.EchoString, "hi", &out).Wait()
		}},
		{"Client.GoRaw", func(ctx context.Context) error { return self.GoRaw(ctx, builtin.EchoPacket, []byte("hi")).Wait() }},
		{"Client.OpenStream", func(ctx context.Context) error {
			st, err := self.OpenStream(ctx, builtin.StreamSource)
			if err != nil {
				return err
			}
			defer st.Close()
			_, err = st.Write([]byte{0, 0, 0, 0, 0, 0, 0, 2}) // two bytes, please
			if err == nil {
				_, err = io.ReadFull(st, make([]byte, 2))
			}
			return err
		}},
		{"Client.Subscribe", func(ctx context.Context) error {
			sub, err := self.Subscribe(ctx, "inline.>", make(chan client.Message, 1))
			if err == nil {
				sub.Unsubscribe()
			}
			return err
		}},
		{"Cluster.Call", func(ctx context.Context) error {
			var out string
			return k.Call(ctx, builtin.EchoString, "hi", &out)
		}},
		{"Cluster.CallRaw", func(ctx context.Context) error {
			_, err := k.CallRaw(ctx, builtin.EchoPacket, []byte("hi"), nil)
			return err
		}},
		{"Cluster.GoRaw", func(ctx context.Context) error { return k.GoRaw(ctx, builtin.EchoPacket, []byte("hi")).Wait() }},
	}
	entered := make(chan struct{}, 1)
	got := make(chan outcome, 1)
	reg.HandleFunc("Inline/CallsOut", func(ctx context.Context, req, reply []byte) ([]byte, error) {
		entered <- struct{}{}
		began := time.Now()
		err := calls[req[0]].call(ctx) // req names the call to make
		got <- outcome{err, time.Since(began)}
		return reply, err
	})

	c := dial(t, s, client.Options{})
	other := dial(t, s, client.Options{}) // an unrelated client, on the same loop
	for i, tc := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		callerErr := make(chan error, 1)
		go func() {
			_, err := c.CallRaw(ctx, "Inline/CallsOut", []byte{byte(i)}, nil)
			callerErr <- err
		}()
		<-entered
		octx, ocancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		reply, oerr := other.CallRaw(octx, builtin.EchoPacket, []byte("unrelated"), nil)
		ocancel()
		o := <-got
		cerr := <-callerErr
		cancel()

		if oerr != nil || string(reply) != "unrelated" {
			t.Errorf("%s: the unrelated client on another connection: %q, %v", tc.name, reply, oerr)
		}
		var he *handler.Error
		if !errors.As(o.err, &he) || !errors.Is(o.err, handler.ErrFailedPrecondition) || !he.Unprocessed {
			t.Errorf("%s from an inline handler: %v (after %v); want FailedPrecondition, unprocessed", tc.name, o.err, o.took)
			continue
		}
		if o.took > 100*time.Millisecond {
			t.Errorf("%s: refused after %v; want at once", tc.name, o.took)
		}
		for _, want := range []string{"Inline/CallsOut", "handler.Blocking()"} {
			if !strings.Contains(he.Message, want) {
				t.Errorf("%s: the refusal %q does not name %q", tc.name, he.Message, want)
			}
		}
		if !errors.Is(cerr, handler.ErrFailedPrecondition) {
			t.Errorf("%s: the caller got %v; want the handler's FailedPrecondition", tc.name, cerr)
		}
	}

	// Notify only queues the message: it is allowed, and arrives.
	reg.HandleFunc("Inline/Notifies", func(ctx context.Context, _, reply []byte) ([]byte, error) {
		return reply, self.NotifyRaw(ctx, builtin.EchoPacket, []byte("one way"))
	})
	if _, err := c.CallRaw(ctxT(t), "Inline/Notifies", nil, nil); err != nil {
		t.Fatalf("Notify from an inline handler: %v", err)
	}
}
