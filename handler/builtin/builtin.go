// Package builtin holds the routes that `rpcd serve` ships with: a ping, a
// route list, the routes' descriptions (Sys/Describe), health and
// statistics, Math/Sum, and the handlers of the benchmark scenarios (NoArg,
// EchoString, MultiArgs, EchoPacket; docs/performance.md). It is API: a
// program embedding rpcd registers them with Register, and the bench module
// serves them from every system it compares.
package builtin

import (
	"context"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// Route names.
const (
	Ping       = "Sys/Ping"
	Routes     = "Sys/Routes"
	Sum        = "Math/Sum"
	NoArg      = "Bench/NoArg"
	EchoString = "Bench/EchoString"
	MultiArgs  = "Bench/MultiArgs"
	EchoPacket = "Bench/EchoPacket"
)

// SumArgs is the argument of Math/Sum.
type SumArgs struct {
	A int64 `json:"a"`
	B int64 `json:"b"`
}

// MultiArgsIn is the argument of Bench/MultiArgs: one field of each
// primitive type, as in the NewLife report's MultiArgs scenario.
type MultiArgsIn struct {
	I32 int32   `json:"i32"`
	I64 int64   `json:"i64"`
	B   bool    `json:"b"`
	F64 float64 `json:"f64"`
	S   string  `json:"s"`
}

// MultiArgsResult computes Bench/MultiArgs's reply: the numbers summed, plus
// one if B, plus the length of S.
func MultiArgsResult(in MultiArgsIn) float64 {
	r := float64(in.I32) + float64(in.I64) + in.F64 + float64(len(in.S))
	if in.B {
		r++
	}
	return r
}

// NoArgReply is what Bench/NoArg returns: the int32 42, in JSON.
const NoArgReply = "42"

// Register adds the built-in routes to reg, Sys/Describe among them
// (HandleDescribe).
func Register(reg *handler.Registry) {
	reg.HandleFunc(Ping, func(_ context.Context, _, reply []byte) ([]byte, error) {
		return append(reply, `"pong"`...), nil
	})
	reg.Handle(Routes, handler.Func(func(context.Context, struct{}) ([]handler.RouteInfo, error) {
		return reg.Routes(), nil
	}))
	HandleDescribe(reg)
	reg.Handle(Sum, handler.Func(func(_ context.Context, in SumArgs) (int64, error) {
		sum := in.A + in.B
		if (in.A > 0 && in.B > 0 && sum < 0) || (in.A < 0 && in.B < 0 && sum >= 0) {
			return 0, handler.Errorf(proto.CodeOutOfRange, "%d + %d overflows int64", in.A, in.B)
		}
		return sum, nil
	}))
	// NoArg's reply is the same bytes in JSON and raw, so it needs no codec.
	reg.HandleFunc(NoArg, func(_ context.Context, _, reply []byte) ([]byte, error) {
		return append(reply, NoArgReply...), nil
	})
	reg.Handle(EchoString, handler.Func(func(_ context.Context, s string) (string, error) {
		return s, nil
	}))
	reg.Handle(MultiArgs, handler.Func(func(_ context.Context, in MultiArgsIn) (float64, error) {
		return MultiArgsResult(in), nil
	}))
	// The request is the reply: a server writes a large one from where it
	// came in, without copying it (handler.Route.ServeOwn).
	reg.HandleFunc(EchoPacket, func(_ context.Context, req, _ []byte) ([]byte, error) {
		return req, nil
	})
	RegisterStreams(reg)
}
