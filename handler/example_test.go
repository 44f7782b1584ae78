package handler_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log"
	"strings"

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

// gzipJSON is an application's codec: JSON, compressed with gzip.
type gzipJSON struct{}

func (gzipJSON) ID() proto.Codec { return 0x81 } // agreed by both ends

func (gzipJSON) Append(dst []byte, v any) ([]byte, error) {
	js, err := handler.JSON.Append(nil, v)
	if err != nil {
		return dst, err
	}
	b := bytes.NewBuffer(dst)
	zw := gzip.NewWriter(b)
	if _, err := zw.Write(js); err != nil {
		return dst, err
	}
	err = zw.Close()
	return b.Bytes(), err
}

func (gzipJSON) Unmarshal(data []byte, v any) error {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return err
	}
	js, err := io.ReadAll(zr)
	if err != nil {
		return err
	}
	return handler.JSON.Unmarshal(js, v)
}

// A codec of the application's own: typed routes take it once registered,
// and a client sends its typed calls in it. This one compresses JSON.
func ExampleRegisterCodec() {
	handler.RegisterCodec(gzipJSON{}) // on the server, before serving

	reg := handler.NewRegistry()
	reg.Handle("Text/Upper", handler.Func(func(_ context.Context, s string) (string, error) {
		return strings.ToUpper(s), nil
	}))
	srv := reactor.New(reg, reactor.Options{})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown(context.Background())

	c, err := client.Dial(context.Background(), srv.Addr().String(), client.Options{Codec: gzipJSON{}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	var out string
	if err := c.Call(context.Background(), "Text/Upper", strings.Repeat("ab", 1000), &out); err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(out), out[:6])
	// Output: 2000 ABABAB
}
