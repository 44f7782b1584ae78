package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

type greetArgs struct {
	Name string `json:"name"`
}

// The methods of a test service, declared once for both ends.
var (
	greet   = handler.Method[greetArgs, string]("Test/Greet")
	whoAmI  = handler.Method[struct{}, string]("Test/WhoAmI")   // served by the client, called back
	callOut = handler.Method[struct{}, string]("Test/CallBack") // makes the server call the client
)

// TestMethod: a route declared as a handler.Method is served with Handle
// and called with Call through a Client, a Cluster and, from the server,
// the client's Peer; the reply has the declared type, and a route's error
// comes back as from Call.
func TestMethod(t *testing.T) {
	reg := handler.NewRegistry()
	greet.Handle(reg, func(_ context.Context, in greetArgs) (string, error) {
		if in.Name == "" {
			return "", handler.Errorf(proto.CodeInvalidArgument, "no name")
		}
		return "hello, " + in.Name, nil
	})
	callOut.Handle(reg, func(ctx context.Context, _ struct{}) (string, error) {
		return whoAmI.Call(ctx, handler.CallFrom(ctx).Peer, struct{}{})
	}, handler.Blocking()) // it waits for the client's answer
	s := reactor.New(reg, reactor.Options{Loops: 1})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, s) })
	addr := s.Addr().String()

	mine := handler.NewRegistry()
	whoAmI.Handle(mine, func(context.Context, struct{}) (string, error) { return "the client", nil })
	c := dial(t, addr, client.Options{Handler: mine})
	k := dialService(t, "static://"+addr+"/svc", client.ServiceOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	for name, via := range map[string]handler.Caller{"Client": c, "Cluster": k} {
		got, err := greet.Call(ctx, via, greetArgs{Name: "rpcd"})
		if err != nil || got != "hello, rpcd" {
			t.Errorf("%s: %q, %v", name, got, err)
		}
		if _, err := greet.Call(ctx, via, greetArgs{}); !errors.Is(err, handler.ErrInvalidArgument) || !strings.Contains(err.Error(), "no name") {
			t.Errorf("%s: the route's error: %v", name, err)
		}
	}
	if got, err := callOut.Call(ctx, c, struct{}{}); err != nil || got != "the client" {
		t.Errorf("a call back through the Peer: %q, %v", got, err)
	}
}
