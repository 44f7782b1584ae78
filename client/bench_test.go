package client_test

import (
	"context"
	"testing"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler/builtin"
)

// BenchmarkCallRaw measures 16-byte raw echo calls over loopback against an
// in-process server: one caller at a time (Sequential) and as many callers
// as b.RunParallel starts on one connection (Multiplexed; raise them with
// -cpu). Client and server share the machine's cores.
func BenchmarkCallRaw(b *testing.B) {
	s := server(b, "127.0.0.1:0")
	c := dial(b, s.Addr().String(), client.Options{})
	req := make([]byte, 16)
	ctx := context.Background()
	b.Run("Sequential", func(b *testing.B) {
		reply := make([]byte, 0, 64)
		b.ReportAllocs()
		for b.Loop() {
			var err error
			if reply, err = c.CallRaw(ctx, builtin.EchoPacket, req, reply[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Sequential1MiB", func(b *testing.B) {
		req := make([]byte, 1<<20)
		reply := make([]byte, 0, len(req))
		b.SetBytes(int64(len(req)))
		for b.Loop() {
			var err error
			if reply, err = c.CallRaw(ctx, builtin.EchoPacket, req, reply[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Multiplexed", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(64)
		b.RunParallel(func(pb *testing.PB) {
			reply := make([]byte, 0, 64)
			for pb.Next() {
				var err error
				if reply, err = c.CallRaw(ctx, builtin.EchoPacket, req, reply[:0]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkCallJSON measures Math/Sum calls with JSON arguments and reply.
func BenchmarkCallJSON(b *testing.B) {
	s := server(b, "127.0.0.1:0")
	c := dial(b, s.Addr().String(), client.Options{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		var sum int64
		if err := c.Call(ctx, builtin.Sum, builtin.SumArgs{A: 1, B: 2}, &sum); err != nil || sum != 3 {
			b.Fatal(sum, err)
		}
	}
}
