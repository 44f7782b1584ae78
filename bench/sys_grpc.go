package main

import (
	"context"
	"encoding/binary"
	"errors"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// grpcSystem is gRPC-Go as its users run it: a unary method whose request
// and reply are protobuf messages (wrapperspb.BytesValue, so no protoc is
// needed), the default proto codec, a service description and client stub
// written as protoc-gen-go-grpc would generate them, insecure credentials on
// loopback. Per grpc.io's performance guide, ClientConns and stubs are made
// once and reused; a cell with n connections holds n ClientConns (each one
// HTTP/2 connection) and caller w uses ClientConn w % n.
type grpcSystem struct{}

func init() { register(grpcSystem{}) }

func (grpcSystem) name() string { return "grpc" }

// echoServer is the server API for the bench.Echo service, as
// protoc-gen-go-grpc would generate it.
type echoServer interface {
	Echo(context.Context, *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error)
}

const (
	echoMethod = "/bench.Echo/Echo"
	sumMethod  = "/bench.Echo/Sum"
)

// echoServiceDesc is the grpc.ServiceDesc for the bench.Echo service, as
// protoc-gen-go-grpc would generate it for
//
//	service Echo {
//	  rpc Echo(google.protobuf.BytesValue) returns (google.protobuf.BytesValue);
//	  rpc Sum(google.protobuf.BytesValue) returns (google.protobuf.Int64Value); // for the RRQM test
//	}
var echoServiceDesc = grpc.ServiceDesc{
	ServiceName: "bench.Echo",
	HandlerType: (*echoServer)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Echo", Handler: echoEchoHandler},
		{MethodName: "Sum", Handler: echoSumHandler},
	},
	Streams:  []grpc.StreamDesc{},
	Metadata: "bench/echo.proto",
}

func echoEchoHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(wrapperspb.BytesValue)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return srv.(echoServer).Echo(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: echoMethod}
	handler := func(ctx context.Context, req any) (any, error) {
		return srv.(echoServer).Echo(ctx, req.(*wrapperspb.BytesValue))
	}
	return interceptor(ctx, in, info, handler)
}

// echoSumHandler serves Sum: two big-endian int64s in, their sum out.
func echoSumHandler(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	in := new(wrapperspb.BytesValue)
	if err := dec(in); err != nil {
		return nil, err
	}
	if len(in.Value) != 16 {
		return nil, errors.New("bench: Sum wants 16 bytes")
	}
	a, b := int64(binary.BigEndian.Uint64(in.Value)), int64(binary.BigEndian.Uint64(in.Value[8:]))
	return &wrapperspb.Int64Value{Value: a + b}, nil
}

// echoClient is the client stub, as protoc-gen-go-grpc would generate it.
type echoClient struct{ cc grpc.ClientConnInterface }

func (c echoClient) Echo(ctx context.Context, in *wrapperspb.BytesValue, opts ...grpc.CallOption) (*wrapperspb.BytesValue, error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	out := new(wrapperspb.BytesValue)
	if err := c.cc.Invoke(ctx, echoMethod, in, out, cOpts...); err != nil {
		return nil, err
	}
	return out, nil
}

// grpcEcho implements echoServer.
type grpcEcho struct{}

func (grpcEcho) Echo(_ context.Context, in *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error) {
	return &wrapperspb.BytesValue{Value: in.Value}, nil
}

func (grpcSystem) serve(addr string) (func(), string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	srv := grpc.NewServer()
	srv.RegisterService(&echoServiceDesc, grpcEcho{})
	stop := serveInBackground(func() { _ = srv.Serve(ln) }, srv.Stop)
	return stop, ln.Addr().String(), nil
}

func (grpcSystem) dial(addr string, conns int) (caller, error) {
	g := &grpcCaller{}
	for range conns {
		// passthrough: the address is an IP:port; no resolver needed.
		cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			g.close()
			return nil, err
		}
		cc.Connect()
		g.ccs = append(g.ccs, cc)
		g.stubs = append(g.stubs, echoClient{cc})
	}
	return g, nil
}

type grpcCaller struct {
	ccs   []*grpc.ClientConn
	stubs []echoClient
}

func (g *grpcCaller) call(ctx context.Context, worker int, req, reply []byte) ([]byte, error) {
	out, err := g.stubs[connIndex(worker, len(g.stubs))].Echo(ctx, &wrapperspb.BytesValue{Value: req})
	if err != nil {
		return reply, err
	}
	return out.Value, nil // a fresh slice from the decoder, ours to keep
}

func (g *grpcCaller) close() error {
	var errs []error
	for _, cc := range g.ccs {
		errs = append(errs, cc.Close())
	}
	return errors.Join(errs...)
}
