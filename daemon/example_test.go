package daemon_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/daemon"
	"github.com/rpcd/rpcd/handler"
)

// Every listener rpcd serve opens (the RPC port, the gateway with /rpc,
// /jsonrpc, /openapi.json and /ws, the admin listener) and a route of the
// program's own, called over the RPC port and the gateway; then a drain.
func Example() {
	cfg := daemon.DefaultConfig()
	cfg.Addr, cfg.Gateway, cfg.Admin = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	d, err := daemon.New(cfg, daemon.WithLogOutput(io.Discard))
	if err != nil {
		log.Fatal(err)
	}
	d.Registry().Handle("Greet/Hello", handler.Func(func(_ context.Context, name string) (string, error) {
		return "hello, " + name, nil
	}))
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	<-d.Ready()

	c, err := client.Dial(ctx, d.Addr().String(), client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	var reply string
	err = c.Call(ctx, "Greet/Hello", "gopher", &reply)
	c.Close()
	fmt.Println(reply, err)

	resp, err := http.Post("http://"+d.GatewayAddr().String()+"/rpc/Greet/Hello", "application/json", strings.NewReader(`"gateway"`))
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.Status, string(body))

	stop()
	fmt.Println(<-done)
	// Output:
	// hello, gopher <nil>
	// 200 OK "hello, gateway"
	// <nil>
}
