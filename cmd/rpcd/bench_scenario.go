package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/loadgen"
)

// benchCall makes one call and returns the payload bytes it moved, request
// and reply together. A reply that is not the one expected is an error
// wrapping loadgen.ErrWrongReply.
type benchCall func(ctx context.Context) (int, error)

// scenario is a named load: the route called, what each call sends and how
// its reply is checked.
type scenario struct {
	name   string
	route  string
	codec  string // "json" or "raw"
	size   int    // request payload bytes, encoded
	custom bool   // -route, not a named scenario

	// newCall returns the call of caller number worker on cl, with buffers
	// of its own.
	newCall func(cl caller, worker int) benchCall
}

// scenarios are the named loads of -scenario, in the order -h lists them.
var scenarios = []*scenario{
	noArgScenario(),
	echoStringScenario("EchoString16", 16),
	echoStringScenario("EchoString2000", 2000),
	multiArgsScenario(),
	echoPacketScenario("EchoPacket16", 16),
	echoPacketScenario("EchoPacket2000", 2000),
	sumScenario(),
}

// lookupScenario returns the scenario called name, in any case, or nil.
func lookupScenario(name string) *scenario {
	for _, sc := range scenarios {
		if strings.EqualFold(sc.name, name) {
			return sc
		}
	}
	return nil
}

// scenarioNames returns the names of the call scenarios, in table order.
func scenarioNames() []string {
	names := make([]string, len(scenarios))
	for i, sc := range scenarios {
		names[i] = sc.name
	}
	return names
}

// otherLoads are the loads bench's -scenario names that are not calls,
// each with what it is and the function that runs it: with scenarios,
// every name -scenario takes. bench dispatches on this table, and its
// error and -h list it, so the three cannot disagree.
var otherLoads = []struct {
	name, what string
	run        func(*cli, *benchFlags) error
}{
	{fanOutScenario, "publish/subscribe: one publisher, -subs subscribers", (*cli).benchFanOut},
	{streamUploadScenario, "stream goodput to the server: -c streams of -size bytes (default 256 MiB)", (*cli).benchStream},
	{streamDownloadScenario, "stream goodput from the server, as StreamUpload", (*cli).benchStream},
}

// otherLoad returns the entry of otherLoads called name, in any case, or
// nil.
func otherLoad(name string) func(*cli, *benchFlags) error {
	for _, l := range otherLoads {
		if strings.EqualFold(l.name, name) {
			return l.run
		}
	}
	return nil
}

// benchScenarioNames returns every name bench's -scenario takes: the call
// scenarios, then the other loads.
func benchScenarioNames() []string {
	names := scenarioNames()
	for _, l := range otherLoads {
		names = append(names, l.name)
	}
	return names
}

// benchScenarioUsage is the usage of bench's -scenario.
func benchScenarioUsage() string {
	var b strings.Builder
	b.WriteString("`name` of the load: ")
	b.WriteString(strings.Join(scenarioNames(), ", "))
	for _, l := range otherLoads {
		b.WriteString(", " + l.name + " (" + l.what + ")")
	}
	return b.String()
}

// wrongReply returns an ErrWrongReply with the details.
func wrongReply(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{loadgen.ErrWrongReply}, args...)...)
}

// noArgWant is Bench/NoArg's reply, decoded.
var noArgWant = func() int32 {
	n, err := strconv.ParseInt(builtin.NoArgReply, 10, 32)
	if err != nil {
		panic("rpcd: builtin.NoArgReply is not an int32: " + builtin.NoArgReply)
	}
	return int32(n)
}()

func noArgScenario() *scenario {
	return &scenario{name: "NoArg", route: builtin.NoArg, codec: "json", size: 0,
		newCall: func(cl caller, _ int) benchCall {
			var out int32
			outp := any(&out) // boxed once, not on every call
			return func(ctx context.Context) (int, error) {
				out = 0
				if err := cl.Call(ctx, builtin.NoArg, nil, outp); err != nil {
					return 0, err
				}
				if out != noArgWant {
					return len(builtin.NoArgReply), wrongReply("%s returned %d, want %d", builtin.NoArg, out, noArgWant)
				}
				return len(builtin.NoArgReply), nil
			}
		}}
}

func echoStringScenario(name string, n int) *scenario {
	s := string(pattern(n))
	return &scenario{name: name, route: builtin.EchoString, codec: "json", size: n + 2,
		newCall: func(cl caller, _ int) benchCall {
			in := any(s)
			var out string
			outp := any(&out)
			return func(ctx context.Context) (int, error) {
				out = ""
				if err := cl.Call(ctx, builtin.EchoString, in, outp); err != nil {
					return 0, err
				}
				if out != s {
					return n + 2 + len(out) + 2, wrongReply("%s returned a string of %d bytes that differs from the %d sent", builtin.EchoString, len(out), n)
				}
				return 2 * (n + 2), nil
			}
		}}
}

// multiArgsIn is what MultiArgs sends: every field set, every number exact
// in a float64.
var multiArgsIn = builtin.MultiArgsIn{I32: 123456, I64: 1<<40 + 7, B: true, F64: 3.25, S: "NewLife.Remoting"}

func multiArgsScenario() *scenario {
	want := builtin.MultiArgsResult(multiArgsIn)
	req := mustJSON(multiArgsIn)
	reply := mustJSON(want)
	return &scenario{name: "MultiArgs", route: builtin.MultiArgs, codec: "json", size: len(req),
		newCall: func(cl caller, _ int) benchCall {
			args := multiArgsIn
			in := any(&args)
			var out float64
			outp := any(&out)
			return func(ctx context.Context) (int, error) {
				out = 0
				if err := cl.Call(ctx, builtin.MultiArgs, in, outp); err != nil {
					return 0, err
				}
				if out != want {
					return len(req) + len(reply), wrongReply("%s returned %v, want %v", builtin.MultiArgs, out, want)
				}
				return len(req) + len(reply), nil
			}
		}}
}

func echoPacketScenario(name string, n int) *scenario {
	sc := rawRouteScenario(builtin.EchoPacket, pattern(n), true)
	sc.name, sc.custom = name, false
	return sc
}

func sumScenario() *scenario {
	return &scenario{name: "Sum", route: builtin.Sum, codec: "json",
		size: len(mustJSON(builtin.SumArgs{})), // at its smallest; it varies
		newCall: func(cl caller, worker int) benchCall {
			var args builtin.SumArgs
			in := any(&args)
			var out int64
			outp := any(&out)
			var seq int64
			return func(ctx context.Context) (int, error) {
				seq++
				// a and b change on every call, and differ between callers;
				// b is negative on the first calls of all callers but the
				// first.
				args.A = int64(worker)*1_000_003 + seq
				args.B = seq*7 - int64(worker)
				want := args.A + args.B
				out = 0
				if err := cl.Call(ctx, builtin.Sum, in, outp); err != nil {
					return 0, err
				}
				n := len(`{"a":,"b":}`) + intLen(args.A) + intLen(args.B) + intLen(out)
				if out != want {
					return n, wrongReply("%s(%d, %d) returned %d, want %d", builtin.Sum, args.A, args.B, out, want)
				}
				return n, nil
			}
		}}
}

// rawRouteScenario sends payload raw to route with CallRaw; with echo, a
// reply must equal payload byte for byte.
func rawRouteScenario(route string, payload []byte, echo bool) *scenario {
	return &scenario{name: route, route: route, codec: "raw", size: len(payload), custom: true,
		newCall: func(cl caller, _ int) benchCall {
			buf := make([]byte, 0, max(len(payload), 64)) // reused for every reply
			return func(ctx context.Context) (int, error) {
				reply, err := cl.CallRaw(ctx, route, payload, buf[:0])
				if err != nil {
					return 0, err
				}
				buf = reply // keep a buffer grown by a larger reply
				if echo && !bytes.Equal(reply, payload) {
					return len(payload) + len(reply), wrongReply("%s %s", route, echoDiff(reply, payload))
				}
				return len(payload) + len(reply), nil
			}
		}}
}

// jsonRouteScenario sends payload, JSON, to route with Call; with echo, a
// reply must equal payload byte for byte.
func jsonRouteScenario(route string, payload []byte, echo bool) *scenario {
	return &scenario{name: route, route: route, codec: "json", size: len(payload), custom: true,
		newCall: func(cl caller, _ int) benchCall {
			var in any // no payload
			if len(payload) > 0 {
				in = json.RawMessage(payload) // sent as it is
			}
			var out json.RawMessage
			outp := any(&out)
			return func(ctx context.Context) (int, error) {
				out = out[:0]
				if err := cl.Call(ctx, route, in, outp); err != nil {
					return 0, err
				}
				if echo && !bytes.Equal(out, payload) {
					return len(payload) + len(out), wrongReply("%s %s", route, echoDiff(out, payload))
				}
				return len(payload) + len(out), nil
			}
		}}
}

// echoDiff says how an echo differs from what was sent.
func echoDiff(got, sent []byte) string {
	if len(got) != len(sent) {
		return fmt.Sprintf("returned %d bytes, want the %d sent", len(got), len(sent))
	}
	for i := range got {
		if got[i] != sent[i] {
			return fmt.Sprintf("returned %d bytes that differ from those sent at byte %d", len(got), i)
		}
	}
	return "returned the bytes sent" // not reached
}

// pattern returns n bytes of letters and digits.
func pattern(n int) []byte {
	const chars = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	b := make([]byte, n)
	for i := range b {
		b[i] = chars[i%len(chars)]
	}
	return b
}

// jsonString returns a JSON string of n letters and digits: n+2 bytes.
func jsonString(n int) []byte {
	return append(append([]byte{'"'}, pattern(n)...), '"')
}

// mustJSON encodes v with the codec the client uses.
func mustJSON(v any) []byte {
	b, err := handler.JSON.Append(nil, v)
	if err != nil {
		panic(err)
	}
	return b
}

// intLen returns the length of v in decimal.
func intLen(v int64) int {
	n := 1
	if v < 0 {
		n++ // the sign; -v overflows for MinInt64, so count digits of v/10
	}
	for v >= 10 || v <= -10 {
		v /= 10
		n++
	}
	return n
}
