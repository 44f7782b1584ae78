package main

import (
	"context"
	"net"
	"time"

	"github.com/lesismal/arpc"
	arpclog "github.com/lesismal/arpc/log"
)

// arpcSystem is arpc as its README's quick start sets it up: a router
// ("/echo") whose handler writes the request body back (ctx.Body, ctx.Write:
// []byte bodies skip the codec), handled in the connection's reader
// goroutine (arpc's default), batched reads and writes (its defaults); the
// client is one arpc.Client per connection (it multiplexes by sequence
// number), caller w on client w % n.
type arpcSystem struct{}

func init() {
	arpclog.SetLevel(arpclog.LevelNone) // it logs every connection, and every close as an error
	register(arpcSystem{})
}

func (arpcSystem) name() string { return "arpc" }

func (arpcSystem) serve(addr string) (func(), string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	srv := arpc.NewServer()
	srv.Handler.Handle("/echo", func(ctx *arpc.Context) {
		_ = ctx.Write(ctx.Body())
	})
	srv.Handler.Handle("/sum", arpcSum)
	// Closing the listener ends arpc's accept loop, which then closes every
	// connection. (arpc's Stop and Shutdown set a flag that the accept loop
	// reads without synchronization: a data race under -race.)
	stop := serveInBackground(func() { _ = srv.Serve(ln) }, func() { _ = ln.Close() })
	return stop, ln.Addr().String(), nil
}

func (arpcSystem) dial(addr string, conns int) (caller, error) {
	a := &arpcCaller{}
	for range conns {
		c, err := arpc.NewClient(func() (net.Conn, error) {
			return net.DialTimeout("tcp", addr, 5*time.Second)
		})
		if err != nil {
			a.close()
			return nil, err
		}
		a.clients = append(a.clients, c)
	}
	return a, nil
}

type arpcCaller struct{ clients []*arpc.Client }

func (a *arpcCaller) call(ctx context.Context, worker int, req, _ []byte) ([]byte, error) {
	var reply []byte // arpc copies the response body into a new slice
	err := a.clients[connIndex(worker, len(a.clients))].CallWith(ctx, "/echo", req, &reply)
	return reply, err
}

// arpcSum serves /sum for the RRQM test: SumArgs in, their sum out, in
// arpc's default codec (JSON).
func arpcSum(ctx *arpc.Context) {
	var args SumArgs
	if err := ctx.Bind(&args); err != nil {
		_ = ctx.Error(err)
		return
	}
	_ = ctx.Write(args.A + args.B)
}

// sum calls /sum, for the RRQM test.
func (a *arpcCaller) sum(ctx context.Context, x, y int64) (int64, error) {
	var out int64
	err := a.clients[0].CallWith(ctx, "/sum", &SumArgs{A: x, B: y}, &out)
	return out, err
}

func (a *arpcCaller) close() error {
	for _, c := range a.clients {
		c.Stop()
	}
	return nil
}
