package client_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// exampleServer starts a server with the built-in routes for the examples.
func exampleServer() (addr string, stop func()) {
	reg := handler.NewRegistry()
	builtin.Register(reg)
	srv := reactor.New(reg, reactor.Options{})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		log.Fatal(err)
	}
	return srv.Addr().String(), func() { srv.Shutdown(context.Background()) }
}

func ExampleClient_Call() {
	addr, stop := exampleServer()
	defer stop()

	c, err := client.Dial(context.Background(), addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var sum int
	if err := c.Call(ctx, "Math/Sum", map[string]int{"a": 1, "b": 2}, &sum); err != nil {
		log.Fatal(err)
	}
	fmt.Println(sum)
	// Output: 3
}

// CallRaw appends the reply to a buffer the caller reuses: a raw call then
// allocates nothing.
func ExampleClient_CallRaw() {
	addr, stop := exampleServer()
	defer stop()
	c, err := client.Dial(context.Background(), addr, client.Options{Conns: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	reply := make([]byte, 0, 64)
	for _, msg := range []string{"ping", "pong"} {
		reply, err = c.CallRaw(context.Background(), "Bench/EchoPacket", []byte(msg), reply[:0])
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(string(reply))
	}
	// Output:
	// ping
	// pong
}

// Go starts calls without waiting; many may be in flight on one connection.
func ExampleClient_Go() {
	addr, stop := exampleServer()
	defer stop()
	c, err := client.Dial(context.Background(), addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	sums := make([]int, 3)
	var calls []*client.Future
	for i := range sums {
		calls = append(calls, c.Go(context.Background(), "Math/Sum", builtin.SumArgs{A: int64(i), B: 10}, &sums[i]))
	}
	for _, f := range calls {
		if err := f.Wait(); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(sums)
	// Output: [10 11 12]
}

// Metadata travels with the call; handlers read it from their context.
func ExampleWithMetadata() {
	reg := handler.NewRegistry()
	reg.Handle("Tenant/Name", handler.Func(func(ctx context.Context, _ struct{}) (string, error) {
		v, _ := handler.CallFrom(ctx).Metadata.Get("tenant")
		return string(v), nil
	}))
	srv := reactor.New(reg, reactor.Options{})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	c, err := client.Dial(context.Background(), srv.Addr().String(), client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := client.WithMetadata(context.Background(), "tenant", "acme")
	var name string
	if err := c.Call(ctx, "Tenant/Name", nil, &name); err != nil {
		log.Fatal(err)
	}
	fmt.Println(name)
	// Output: acme
}

// Eight callers keep a call each in flight from no goroutine of their own:
// each done function starts its caller's next call, and the calls a batch
// of replies starts go out together.
func ExampleClient_CallRawAsync() {
	addr, stop := exampleServer()
	defer stop()
	c, err := client.Dial(context.Background(), addr, client.Options{Timeout: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	const callers, each = 8, 100
	var wg sync.WaitGroup
	wg.Add(callers)
	var ok atomic.Int64
	for i := range callers {
		req, reply, n := []byte{byte(i)}, make([]byte, 0, 16), 0
		var next func([]byte, error)
		next = func(got []byte, err error) { // on the connection's reader: must not block
			if err == nil && bytes.Equal(got, req) {
				ok.Add(1)
			}
			if n++; n == each || err != nil {
				wg.Done()
				return
			}
			c.CallRawAsync(context.Background(), builtin.EchoPacket, req, reply[:0], next)
		}
		c.CallRawAsync(context.Background(), builtin.EchoPacket, req, reply[:0], next)
	}
	wg.Wait()
	fmt.Println(ok.Load(), "echoes")
	// Output: 800 echoes
}

// Callers that call over and over, each its next call from the last one's
// done function, as a load generator's do: each keeps its own record, and
// times its calls by when their replies were read.
func ExampleAsyncCaller() {
	addr, stop := exampleServer()
	defer stop()
	c, err := client.Dial(context.Background(), addr, client.Options{Timeout: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	const callers, each = 8, 100
	var wg sync.WaitGroup
	wg.Add(callers)
	var ok atomic.Int64
	waited := make([]time.Duration, callers) // each caller's calls, end to end
	for i := range callers {
		req, reply, n := []byte{byte(i)}, make([]byte, 0, 16), 0
		var a *client.AsyncCaller
		sent := time.Now()
		a = c.NewAsyncCaller(func(got []byte, err error) { // on the connection's reader: must not block
			if at := a.Answered(); err == nil && bytes.Equal(got, req) {
				ok.Add(1)
				waited[i] += at.Sub(sent)
				sent = at // the next call starts as this reply's batch was read
			}
			if n++; n == each || err != nil {
				wg.Done()
				return
			}
			a.Call(proto.CodecRaw, builtin.EchoPacket, req, reply[:0])
		})
		a.Call(proto.CodecRaw, builtin.EchoPacket, req, reply[:0])
	}
	wg.Wait()
	fmt.Println(ok.Load(), "echoes", !slices.Contains(waited, 0))
	// Output: 800 echoes true
}

// A pipe of 64 calls in flight, each tag's next call started from its
// last one's done function: the pipe's lock, which the reader holds while
// done runs, is the only one a call takes, so the callers' own state (ok,
// left) needs none.
func ExamplePipe() {
	addr, stop := exampleServer()
	defer stop()
	c, err := client.Dial(context.Background(), addr, client.Options{Timeout: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	const tags, each = 64, 100
	reqs := make([][]byte, tags)
	replies := make([][]byte, tags)
	left := make([]int, tags)
	ok, running := 0, tags
	finished := make(chan struct{})
	var p *client.Pipe
	p = c.NewPipe(tags, func(tag int, got []byte, err error) { // with the pipe held, on the reader: must not block
		if err == nil && bytes.Equal(got, reqs[tag]) {
			ok++
		}
		if left[tag]--; left[tag] > 0 && err == nil {
			p.Next(tag, proto.CodecRaw, builtin.EchoPacket, reqs[tag], replies[tag][:0])
			return
		}
		if running--; running == 0 {
			close(finished)
		}
	})
	p.Run(func() { // the first calls, in one write
		for i := range reqs {
			reqs[i], replies[i], left[i] = []byte{byte(i)}, make([]byte, 0, 16), each
			p.Next(i, proto.CodecRaw, builtin.EchoPacket, reqs[i], replies[i][:0])
		}
	})
	<-finished
	p.Run(func() { fmt.Println(ok, "echoes") }) // ok is the pipe's: read it held
	// Output: 6400 echoes
}
