package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rpcd/rpcd/bench/internal/cputime"
	"github.com/rpcd/rpcd/handler/builtin"
)

// The seed reports' RRQM test (../shared/seeds/README.md): N sequential
// calls of Sum(a, b) on one connection, every result checked, timed as a
// whole. A system takes part when its caller is a summer.

// summer is a caller that can call its server's Sum method.
type summer interface {
	sum(ctx context.Context, a, b int64) (int64, error)
}

// rpcd: Math/Sum, a typed route: JSON arguments {"a":..,"b":..} and a JSON
// number back, through client.Call, as an rpcd user calls it.
func (r rpcdCaller) sum(ctx context.Context, a, b int64) (int64, error) {
	var out int64
	err := r.c.Call(ctx, builtin.Sum, builtin.SumArgs{A: a, B: b}, &out)
	return out, err
}

// net/rpc: Echo.Sum with a struct of two int64s, gob.
func (n *netrpcCaller) sum(_ context.Context, a, b int64) (int64, error) {
	var out int64
	err := n.clients[0].Call("Echo.Sum", &SumArgs{A: a, B: b}, &out)
	return out, err
}

// SumArgs is net/rpc's argument of Echo.Sum.
type SumArgs struct{ A, B int64 }

// Sum returns a + b.
func (NetRPCEcho) Sum(args *SumArgs, reply *int64) error {
	*reply = args.A + args.B
	return nil
}

// gRPC: bench.Echo/Sum; the two int64s travel as the 16 bytes of a
// BytesValue (no protoc here to define a message of two fields), the sum
// comes back as an Int64Value.
func (g *grpcCaller) sum(ctx context.Context, a, b int64) (int64, error) {
	var in [16]byte
	binary.BigEndian.PutUint64(in[:], uint64(a))
	binary.BigEndian.PutUint64(in[8:], uint64(b))
	out := new(wrapperspb.Int64Value)
	if err := g.ccs[0].Invoke(ctx, sumMethod, &wrapperspb.BytesValue{Value: in[:]}, out); err != nil {
		return 0, err
	}
	return out.Value, nil
}

// sumResult is one system's RRQM run.
type sumResult struct {
	System     string  `json:"system"`
	Calls      int     `json:"calls"`
	Seconds    float64 `json:"seconds"`
	CPUPerCall float64 `json:"cpu_per_call_us"`
	Err        string  `json:"error,omitempty"`
}

// runSum runs the RRQM test: n sequential checked Sum calls per system,
// runs times with the systems interleaved, and prints the median times.
func runSum(names []string, n, runs int, inproc bool, w io.Writer) error {
	var sys []string
	for _, name := range names {
		if summers[name] {
			sys = append(sys, name)
		}
	}
	if len(sys) == 0 {
		return errors.New("bench: none of the systems has a Sum method")
	}
	results := map[string][]sumResult{}
	var failed error
	for r := range runs {
		for _, name := range order(sys, r) {
			res := sumOnce(name, n, inproc)
			results[name] = append(results[name], res)
			if res.Err != "" {
				failed = fmt.Errorf("bench: %s: %s", name, res.Err)
			}
		}
	}
	fmt.Fprintf(w, "== RRQM: %d sequential Sum(a, b) calls on one connection, each checked · median of %d runs\n", n, runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tseconds\tµs/call\t×rpcd time\tCPU µs/call\t")
	base := 0.0
	for _, name := range sys {
		m := medianSum(results[name])
		if name == "rpcd" {
			base = m.Seconds
		}
		ratio := "-"
		if base > 0 && m.Seconds > 0 {
			ratio = fmt.Sprintf("%.2f", m.Seconds/base)
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.1f\t%s\t%.1f\t\n", name, m.Seconds, m.Seconds*1e6/float64(n), ratio, m.CPUPerCall)
	}
	tw.Flush()
	fmt.Fprintln(w, "×rpcd time is the system's time over rpcd's: above 1 is slower. rpcd calls its typed route (JSON), net/rpc uses gob, gRPC protobuf, rpcx MessagePack, arpc JSON, Kitex Thrift.")
	return failed
}

// summers names the systems whose callers implement summer (and whose
// servers serve Sum).
var summers = map[string]bool{"rpcd": true, "netrpc": true, "grpc": true, "rpcx": true, "arpc": true, "kitex": true}

// Every caller of summers sums.
var (
	_ summer = rpcdCaller{}
	_ summer = (*netrpcCaller)(nil)
	_ summer = (*grpcCaller)(nil)
	_ summer = (*rpcxCaller)(nil)
	_ summer = (*arpcCaller)(nil)
	_ summer = kitexCaller{}
)

// sumOnce serves one system and makes n checked Sum calls to it.
func sumOnce(name string, n int, inproc bool) sumResult {
	res := sumResult{System: name, Calls: n}
	srv, err := startServer(systems[name], inproc)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer srv.stop()
	c, err := systems[name].dial(srv.addr, 1)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer c.close()
	s, ok := c.(summer)
	if !ok {
		res.Err = "no Sum method"
		return res
	}
	ctx := context.Background()
	if _, err := s.sum(ctx, 1, 2); err != nil { // connect lazy clients
		res.Err = err.Error()
		return res
	}
	cpu0, scpu0 := cputime.Self(), srvCPU(srv)
	start := time.Now()
	for i := range n {
		a, b := int64(i), int64(i*7+3)
		got, err := s.sum(ctx, a, b)
		if err == nil && got != a+b {
			err = fmt.Errorf("Sum(%d, %d) = %d", a, b, got)
		}
		if err != nil {
			res.Err = err.Error()
			return res
		}
	}
	res.Seconds = time.Since(start).Seconds()
	res.CPUPerCall = float64((cputime.Self()-cpu0)+(srvCPU(srv)-scpu0)) / 1e3 / float64(n)
	return res
}

func srvCPU(s *server) time.Duration {
	d, _ := s.cpu()
	return d
}

func medianSum(rs []sumResult) sumResult {
	ok := make([]sumResult, 0, len(rs))
	for _, r := range rs {
		if r.Err == "" {
			ok = append(ok, r)
		}
	}
	if len(ok) == 0 {
		return sumResult{}
	}
	sort.Slice(ok, func(i, j int) bool { return ok[i].Seconds < ok[j].Seconds })
	return ok[(len(ok)-1)/2]
}
