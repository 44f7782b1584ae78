package main

import (
	"context"
	"errors"
	"net"

	rpcxclient "github.com/smallnest/rpcx/client"
	rpcxlog "github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/protocol"
	rpcxserver "github.com/smallnest/rpcx/server"
)

// rpcxSystem is rpcx with its raw-bytes codec (protocol.SerializeNone, which
// its README lists as "raw slice of bytes" beside JSON, Protobuf and
// MessagePack): a service method taking []byte and replying *[]byte, so
// nothing is serialized. The server is rpcx's default (a goroutine per
// request, the cmux listener that also offers its HTTP gateway); the client
// is the peer-to-peer client.Client, one per connection (it multiplexes by
// sequence number), caller w on client w % n.
type rpcxSystem struct{}

func init() {
	rpcxlog.SetDummyLogger() // it logs every closed connection at info level
	register(rpcxSystem{})
}

func (rpcxSystem) name() string { return "rpcx" }

// RpcxEcho is the rpcx service.
type RpcxEcho struct{}

// Echo returns its argument. args is the request's own payload, allocated
// for this request, so the reply may share it.
func (RpcxEcho) Echo(_ context.Context, args []byte, reply *[]byte) error {
	*reply = args
	return nil
}

func (rpcxSystem) serve(addr string) (func(), string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	srv := rpcxserver.NewServer()
	if err := srv.RegisterName("Echo", RpcxEcho{}, ""); err != nil {
		ln.Close()
		return nil, "", err
	}
	stop := serveInBackground(func() { _ = srv.ServeListener("tcp", ln) }, func() { _ = srv.Close() })
	return stop, ln.Addr().String(), nil
}

func (rpcxSystem) dial(addr string, conns int) (caller, error) {
	opt := rpcxclient.DefaultOption
	opt.SerializeType = protocol.SerializeNone
	r := &rpcxCaller{addr: addr}
	for range conns {
		c := rpcxclient.NewClient(opt)
		if err := c.Connect("tcp", addr); err != nil {
			r.close()
			return nil, err
		}
		r.clients = append(r.clients, c)
	}
	return r, nil
}

type rpcxCaller struct {
	clients []*rpcxclient.Client
	addr    string
	summer  *rpcxclient.Client // for the RRQM test: rpcx's default codec; made at the first sum
}

func (r *rpcxCaller) call(ctx context.Context, worker int, req, _ []byte) ([]byte, error) {
	var reply []byte // ByteCodec points it at the response's own payload
	err := r.clients[connIndex(worker, len(r.clients))].Call(ctx, "Echo", "Echo", req, &reply)
	return reply, err
}

// sum calls Echo.Sum, for the RRQM test, on a client of its own with
// rpcx's default codec (MessagePack), as a typed call is made; the echo's
// clients send raw bytes. The first call connects it: the test calls sum
// from one goroutine.
func (r *rpcxCaller) sum(ctx context.Context, a, b int64) (int64, error) {
	if r.summer == nil {
		c := rpcxclient.NewClient(rpcxclient.DefaultOption)
		if err := c.Connect("tcp", r.addr); err != nil {
			return 0, err
		}
		r.summer = c
	}
	var out int64
	err := r.summer.Call(ctx, "Echo", "Sum", &SumArgs{A: a, B: b}, &out)
	return out, err
}

// Sum returns a + b, for the RRQM test.
func (RpcxEcho) Sum(_ context.Context, args *SumArgs, reply *int64) error {
	*reply = args.A + args.B
	return nil
}

func (r *rpcxCaller) close() error {
	var errs []error
	for _, c := range r.clients {
		errs = append(errs, c.Close())
	}
	if r.summer != nil {
		errs = append(errs, r.summer.Close())
	}
	return errors.Join(errs...)
}
