package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"storj.io/drpc"
	"storj.io/drpc/drpcconn"
	"storj.io/drpc/drpcmux"
	"storj.io/drpc/drpcserver"
)

// drpcSystem is storj's drpc with a hand-written description (what
// protoc-gen-go-drpc would generate) and a raw-bytes encoding in place of
// protobuf, so nothing is serialized. A drpc connection runs one RPC at a
// time by design (its README points to a pool for concurrency), so callers
// sharing a connection queue for it; a cell with n connections holds n
// drpcconn.Conns, caller w on conn w % n.
type drpcSystem struct{}

func init() { register(drpcSystem{}) }

func (drpcSystem) name() string { return "drpc" }

// rawEncoding marshals *[]byte messages as their bytes.
type rawEncoding struct{}

func (rawEncoding) Marshal(msg drpc.Message) ([]byte, error) {
	p, ok := msg.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("bench: drpc raw encoding: %T is not *[]byte", msg)
	}
	return *p, nil
}

// MarshalAppend lets drpcconn append into its reused write buffer.
func (rawEncoding) MarshalAppend(buf []byte, msg drpc.Message) ([]byte, error) {
	p, ok := msg.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("bench: drpc raw encoding: %T is not *[]byte", msg)
	}
	return append(buf, *p...), nil
}

// Unmarshal copies buf, which drpc reuses, into *msg's own storage.
func (rawEncoding) Unmarshal(buf []byte, msg drpc.Message) error {
	p, ok := msg.(*[]byte)
	if !ok {
		return fmt.Errorf("bench: drpc raw encoding: %T is not *[]byte", msg)
	}
	*p = append((*p)[:0], buf...)
	return nil
}

const drpcEchoRPC = "/bench.Echo/Echo"

// drpcEchoServer is the server API, as protoc-gen-go-drpc would generate it.
type drpcEchoServer interface {
	Echo(context.Context, *[]byte) (*[]byte, error)
}

// drpcEchoDescription describes bench.Echo to drpcmux.
type drpcEchoDescription struct{}

func (drpcEchoDescription) NumMethods() int { return 1 }

func (drpcEchoDescription) Method(n int) (string, drpc.Encoding, drpc.Receiver, any, bool) {
	if n != 0 {
		return "", nil, nil, nil, false
	}
	return drpcEchoRPC, rawEncoding{},
		func(srv any, ctx context.Context, in1, _ any) (drpc.Message, error) {
			return srv.(drpcEchoServer).Echo(ctx, in1.(*[]byte))
		}, drpcEchoServer.Echo, true
}

// drpcEcho implements drpcEchoServer.
type drpcEcho struct{}

func (drpcEcho) Echo(_ context.Context, in *[]byte) (*[]byte, error) { return in, nil }

func (drpcSystem) serve(addr string) (func(), string, error) {
	mux := drpcmux.New()
	if err := mux.Register(drpcEcho{}, drpcEchoDescription{}); err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	srv := drpcserver.New(mux)
	ctx, cancel := context.WithCancel(context.Background())
	stop := serveInBackground(func() { _ = srv.Serve(ctx, ln) }, cancel)
	return stop, ln.Addr().String(), nil
}

func (drpcSystem) dial(addr string, conns int) (caller, error) {
	d := &drpcCaller{}
	for range conns {
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			d.close()
			return nil, err
		}
		d.conns = append(d.conns, drpcconn.New(nc))
	}
	return d, nil
}

type drpcCaller struct{ conns []*drpcconn.Conn }

func (d *drpcCaller) call(ctx context.Context, worker int, req, reply []byte) ([]byte, error) {
	out := reply[:0]
	err := d.conns[connIndex(worker, len(d.conns))].Invoke(ctx, drpcEchoRPC, rawEncoding{}, &req, &out)
	return out, err
}

func (d *drpcCaller) close() error {
	var errs []error
	for _, c := range d.conns {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
