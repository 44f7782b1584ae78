package reactor_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/reactor"
)

// A program registers its routes, serves them on gnet event loops, calls
// them with the client, and shuts down gracefully.
func Example() {
	type greeting struct {
		Name string `json:"name"`
	}
	reg := handler.NewRegistry()
	reg.Handle("Greeter/Hello", handler.Func(func(ctx context.Context, in greeting) (string, error) {
		return "hello, " + in.Name, nil
	}))

	srv := reactor.New(reg, reactor.Options{})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		log.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, srv.Addr().String(), client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	var out string
	if err := c.Call(ctx, "Greeter/Hello", greeting{Name: "rpcd"}, &out); err != nil {
		log.Fatal(err)
	}
	fmt.Println(out)

	err = c.Call(ctx, "Greeter/Goodbye", nil, nil)
	fmt.Println(errors.Is(err, handler.ErrNotFound), err)

	c.Close()
	if err := srv.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// hello, rpcd
	// true rpcd: not found: no route Greeter/Goodbye
}

// Shutdown answers the calls in flight before it stops. Here a slow call,
// on the blocking pool, is still served after Shutdown has begun.
func ExampleServer_Shutdown() {
	reg := handler.NewRegistry()
	reg.Handle("Report/Build", handler.Func(func(ctx context.Context, _ struct{}) (string, error) {
		time.Sleep(100 * time.Millisecond) // slow work: a Blocking route
		return "done", nil
	}), handler.Blocking())
	srv := reactor.New(reg, reactor.Options{})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	c, err := client.Dial(ctx, srv.Addr().String(), client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	var report string
	pending := c.Go(ctx, "Report/Build", nil, &report)
	time.Sleep(20 * time.Millisecond) // let the call reach the server

	drainCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(drainCtx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(pending.Wait(), report)
	// Output: <nil> done
}
