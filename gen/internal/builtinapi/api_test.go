package builtinapi_test

import (
	"context"
	"encoding/binary"
	"go/parser"
	"go/token"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/gen/internal/builtinapi"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/servertest"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// TestImportsNoServerPackage: the generated declarations stand alone, for
// a program that does not share the server's Go packages.
func TestImportsNoServerPackage(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "api.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		switch path {
		case "context", "time", "github.com/rpcd/rpcd/handler":
		default:
			t.Errorf("api.go imports %s", path)
		}
	}
}

// TestCalls calls every route of rpcd serve through the declarations rpcd
// gen go wrote for them, on a server that registers them as daemon.New
// does.
func TestCalls(t *testing.T) {
	reg := handler.NewRegistry()
	builtin.Register(reg)
	builtin.HandleStats(reg, func() int { return 7 })
	builtin.HandleHealth(reg, func() bool { return true })
	srv := servertest.Start(t, reg, reactor.Options{Loops: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, srv.Addr().String(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	if n, err := builtinapi.MathSum.Call(ctx, c, builtinapi.SumArgs{A: 1, B: 2}); err != nil || n != 3 {
		t.Errorf("MathSum 1+2 = %d, %v", n, err)
	}
	if _, err := builtinapi.MathSum.Call(ctx, c, builtinapi.SumArgs{A: 1 << 62, B: 1 << 62}); handler.CodeOf(err) != proto.CodeOutOfRange {
		t.Errorf("MathSum overflowing: %v, want OutOfRange", err)
	}
	if s, err := builtinapi.BenchEchoString.Call(ctx, c, "héllo"); err != nil || s != "héllo" {
		t.Errorf("BenchEchoString = %q, %v", s, err)
	}
	if f, err := builtinapi.BenchMultiArgs.Call(ctx, c, builtinapi.MultiArgsIn{I32: 1, I64: 2, B: true, F64: 0.5, S: "abc"}); err != nil || f != 7.5 {
		t.Errorf("BenchMultiArgs = %v, %v", f, err)
	}
	routes, err := builtinapi.SysRoutes.Call(ctx, c, nil)
	if err != nil || len(routes) < 10 {
		t.Fatalf("SysRoutes = %v, %v", routes, err)
	}
	descs, err := builtinapi.SysDescribe.Call(ctx, c, builtinapi.DescribeArg{Route: builtin.Sum})
	if err != nil || len(descs) != 1 || descs[0].Kind != "typed" || descs[0].Argument["title"] != "builtin.SumArgs" {
		t.Errorf("SysDescribe of Math/Sum = %+v, %v", descs, err)
	}
	if st, err := builtinapi.SysStats.Call(ctx, c, nil); err != nil || st.Conns != 7 || st.Goroutines < 1 {
		t.Errorf("SysStats = %+v, %v", st, err)
	}
	if b, err := builtinapi.SysPing.Call(ctx, c, nil); err != nil || string(b) != `"pong"` {
		t.Errorf("SysPing = %q, %v", b, err)
	}
	if b, err := builtinapi.BenchEchoPacket.Call(ctx, c, []byte{0, 1, 255}); err != nil || string(b) != "\x00\x01\xff" {
		t.Errorf("BenchEchoPacket = %q, %v", b, err)
	}

	s, err := builtinapi.BenchStreamSource.Open(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(binary.BigEndian.AppendUint64(nil, 100_000)); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, s)
	if err != nil || n != 100_000 {
		t.Errorf("BenchStreamSource sent %d bytes, %v; want 100000", n, err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("BenchStreamSource's outcome: %v", err)
	}
}
