package handler_test

import (
	"context"
	"fmt"
	"log"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// A typed handler takes and returns Go values; the registry's transport
// encodes them with the call's codec (JSON).
func ExampleFunc() {
	type args struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	reg := handler.NewRegistry()
	reg.Handle("Math/Sum", handler.Func(func(ctx context.Context, in args) (int, error) {
		if in.A < 0 || in.B < 0 {
			return 0, handler.Errorf(proto.CodeOutOfRange, "negative argument")
		}
		return in.A + in.B, nil
	}))

	// What a transport does with a call (normally the reactor does this).
	call := &handler.Call{Route: "Math/Sum", Codec: proto.CodecJSON}
	reply, err := reg.Lookup([]byte("Math/Sum")).Serve(call, []byte(`{"a":1,"b":2}`), nil)
	fmt.Println(string(reply), err)
	_, err = reg.Lookup([]byte("Math/Sum")).Serve(call, []byte(`{"a":-1,"b":2}`), nil)
	fmt.Println(err)
	// Output:
	// 3 <nil>
	// rpcd: out of range: negative argument
}

// A raw handler reads the request bytes in place and appends its reply to a
// buffer the transport owns: no copy, no allocation.
func ExampleHandlerFunc() {
	reg := handler.NewRegistry()
	reg.HandleFunc("Bytes/Reverse", func(_ context.Context, req, reply []byte) ([]byte, error) {
		for i := len(req) - 1; i >= 0; i-- {
			reply = append(reply, req[i])
		}
		return reply, nil
	})
	reply, _ := reg.Lookup([]byte("Bytes/Reverse")).Serve(&handler.Call{}, []byte("stressed"), nil)
	fmt.Println(string(reply))
	// Output: desserts
}

// Middleware wraps every route; the call's route, id and metadata come from
// the context.
func ExampleRegistry_Use() {
	reg := handler.NewRegistry()
	reg.Use(func(next handler.Handler) handler.Handler {
		return handler.HandlerFunc(func(ctx context.Context, req, reply []byte) ([]byte, error) {
			call := handler.CallFrom(ctx)
			if token, _ := call.Metadata.Get("token"); string(token) != "secret" {
				return reply, handler.Errorf(proto.CodePermissionDenied, "%s needs a token", call.Route)
			}
			return next.ServeRPC(ctx, req, reply)
		})
	})
	reg.HandleFunc("Vault/Open", func(_ context.Context, _, reply []byte) ([]byte, error) {
		return append(reply, `"open"`...), nil
	})

	route := reg.Lookup([]byte("Vault/Open"))
	_, err := route.Serve(&handler.Call{Route: "Vault/Open"}, nil, nil)
	fmt.Println(err)
	md := proto.AppendMetadata(nil, "token", []byte("secret"))
	reply, err := route.Serve(&handler.Call{Route: "Vault/Open", Metadata: md}, nil, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(reply))
	// Output:
	// rpcd: permission denied: Vault/Open needs a token
	// "open"
}

// A Method declares a route once, with its types, for the server that
// serves it and the clients that call it.
func ExampleMethod() {
	type args struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	sum := handler.Method[args, int]("Math/Sum") // in a package both ends import

	reg := handler.NewRegistry()
	sum.Handle(reg, func(ctx context.Context, in args) (int, error) { return in.A + in.B, nil })
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
	n, err := sum.Call(context.Background(), c, args{A: 1, B: 2}) // n is an int
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n)
	// Output: 3
}
