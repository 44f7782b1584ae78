package main

import (
	"context"
	"io"
	"net"
	"time"

	kitexclient "github.com/cloudwego/kitex/client"
	"github.com/cloudwego/kitex/pkg/connpool"
	"github.com/cloudwego/kitex/pkg/klog"
	kitexserver "github.com/cloudwego/kitex/server"

	"github.com/rpcd/rpcd/bench/internal/kitexgen/echo"
	echosvc "github.com/rpcd/rpcd/bench/internal/kitexgen/echo/echo"
)

// kitexSystem is CloudWeGo Kitex as its documentation sets it up: a Thrift
// service (internal/kitexgen/echo.thrift: Echo, taking and returning a
// struct with a binary field, and Sum of two i64s for the RRQM test) whose
// code Kitex's generator wrote, with its fast codec; the server and client
// on Kitex's defaults (netpoll, the buffered Thrift transport), the client
// with its long-connection pool.
//
// Kitex runs one call at a time on a connection and pools connections (its
// multiplexing transport is deprecated, "no longer being maintained"), so
// it opens a connection per call in flight: as many as the cell has
// callers. In the one-connection cells of many callers it holds 128
// connections where the others hold one. Its pool keeps that many idle
// between calls (the default keeps 10 per address and would close and
// reopen the rest in the 100-connection cells).
type kitexSystem struct{}

func init() {
	klog.SetOutput(io.Discard) // it logs every server start and stop at info level
	register(kitexSystem{})
}

func (kitexSystem) name() string { return "kitex" }

// kitexEcho is the Echo service's handler.
type kitexEcho struct{}

// Echo returns the request's payload, which the codec copied out of the
// connection's buffer for this request.
func (*kitexEcho) Echo(_ context.Context, req *echo.EchoRequest) (*echo.EchoResponse, error) {
	return &echo.EchoResponse{Payload: req.Payload}, nil
}

// Sum returns a + b, for the RRQM test.
func (*kitexEcho) Sum(_ context.Context, a, b int64) (int64, error) { return a + b, nil }

func (kitexSystem) serve(addr string) (func(), string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	srv := echosvc.NewServer(&kitexEcho{},
		kitexserver.WithListener(ln),
		kitexserver.WithExitWaitTime(time.Second), // the default waits 5 s for connections to go idle
	)
	stop := serveInBackground(func() { _ = srv.Run() }, func() { _ = srv.Stop() })
	return stop, ln.Addr().String(), nil
}

func (kitexSystem) dial(addr string, _ int) (caller, error) {
	// The generic client under the generated one (echosvc.NewClient), whose
	// wrapper would hide its Close.
	c, err := kitexclient.NewClient(echosvc.NewServiceInfoForClient(),
		kitexclient.WithDestService("echo"),
		kitexclient.WithHostPorts(addr),
		kitexclient.WithConnectTimeout(5*time.Second), // the default, 50 ms, fails dials on a loaded machine
		kitexclient.WithLongConnection(connpool.IdleConfig{
			MaxIdlePerAddress: 1 << 10,
			MaxIdleGlobal:     1 << 10,
			MaxIdleTimeout:    time.Minute,
		}),
	)
	if err != nil {
		return nil, err
	}
	return kitexCaller{c}, nil
}

type kitexCaller struct{ c kitexclient.Client }

// call is the generated client's Echo method.
func (k kitexCaller) call(ctx context.Context, _ int, req, _ []byte) ([]byte, error) {
	args := echo.EchoEchoArgs{Req: &echo.EchoRequest{Payload: req}}
	var result echo.EchoEchoResult
	if err := k.c.Call(ctx, "Echo", &args, &result); err != nil {
		return nil, err
	}
	return result.GetSuccess().GetPayload(), nil // decoded into a slice of its own
}

// sum is the generated client's Sum method, for the RRQM test.
func (k kitexCaller) sum(ctx context.Context, a, b int64) (int64, error) {
	args := echo.EchoSumArgs{A: a, B: b}
	var result echo.EchoSumResult
	if err := k.c.Call(ctx, "Sum", &args, &result); err != nil {
		return 0, err
	}
	return result.GetSuccess(), nil
}

func (k kitexCaller) close() error {
	if c, ok := k.c.(io.Closer); ok {
		return c.Close() // and its pool's connections
	}
	return nil
}
