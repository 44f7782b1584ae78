package load

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/rpcd/rpcd/handler"

	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/handler/transport"
)

// Caller is what a scenario calls through: a *client.Client to one server,
// or a *client.Cluster spreading calls over a service's nodes.
type Caller interface {
	Call(ctx context.Context, route string, in, out any) error
	CallRaw(ctx context.Context, route string, req, reply []byte) ([]byte, error)
}

// Call makes one call and returns the payload bytes it moved, request and
// reply together. A reply that is not the one expected is an error
// wrapping ErrWrongReply.
type Call func(ctx context.Context) (int, error)

// Scenario is a named load: the route called, what each call sends and how
// its reply is checked. Scenarios lists the named ones; RawRoute and
// JSONRoute make one for any route; a program may build its own.
type Scenario struct {
	Name  string // as Scenarios and reports give it
	What  string // what it calls and checks, in a line (rpcd bench -h lists it)
	Route string // the route called
	Codec string // "json" or "raw"
	Size  int    // request payload bytes, encoded; Sum's smallest, as it varies

	// NewCall returns the call of caller number worker (0 on) on c, with
	// buffers of its own: it is called once per caller, and each call
	// runs on that caller's goroutine only.
	NewCall func(c Caller, worker int) Call

	// frames, set for the named scenarios, RawRoute's and JSONRoute's, is
	// the same load as payloads, for callers on a client.Pipe (async.go),
	// which have no goroutine of their own to call through Caller: a
	// scenario a program builds has only NewCall, and runs a goroutine per
	// caller.
	frames func(worker int) frameCall

	custom bool // RawRoute's or JSONRoute's: reported as "custom"
}

// frameCall is one caller's calls of a scenario as frames: each request's
// payload appended by request, or fixed, the payload of every call where
// it never changes (request nil); then its reply's payload checked by
// check, which returns the payload bytes moved, as a Call does. A fixed
// payload is made once and sent as it is, so a call builds no request;
// RawRoute's and JSONRoute's callers share theirs.
type frameCall struct {
	request func(dst []byte) []byte
	fixed   []byte
	check   func(reply []byte) (int, error)
}

// typedCall is one caller's calls of a JSON scenario: next, if set,
// prepares each call's argument in; out is zeroed by reset before the
// reply is decoded into it and checked by check. The scenario calls
// through Client.Call (NewCall) or as frames (frames) with the same
// values.
type typedCall struct {
	in    any // the argument, boxed once; nil for none
	outp  any // a pointer to the reply's value, boxed once
	next  func()
	reset func()
	check func() (int, error)
}

// typedScenario returns a JSON scenario whose callers' calls mk makes.
func typedScenario(name, route string, size int, mk func(worker int) *typedCall) Scenario {
	return Scenario{Name: name, Route: route, Codec: "json", Size: size,
		NewCall: func(cl Caller, worker int) Call {
			tc := mk(worker)
			return func(ctx context.Context) (int, error) {
				if tc.next != nil {
					tc.next()
				}
				tc.reset()
				if err := cl.Call(ctx, route, tc.in, tc.outp); err != nil {
					return 0, err
				}
				return tc.check()
			}
		},
		frames: func(worker int) frameCall {
			tc := mk(worker)
			fc := frameCall{check: func(reply []byte) (int, error) {
				tc.reset()
				if err := transport.DecodeReplyWith(handler.JSON, route, reply, tc.outp); err != nil {
					return 0, err
				}
				return tc.check()
			}}
			if tc.next == nil { // the same argument every call: encoded once
				fc.fixed = appendArg(nil, tc.in)
				return fc
			}
			fc.request = func(dst []byte) []byte {
				tc.next()
				return appendArg(dst, tc.in)
			}
			return fc
		}}
}

// appendArg appends a scenario's argument, JSON, to dst.
func appendArg(dst []byte, in any) []byte {
	b, err := transport.AppendArgWith(handler.JSON, dst, in)
	if err != nil {
		panic("rpcd: load: a scenario's argument does not encode: " + err.Error())
	}
	return b
}

// scenarios are the named loads, in the order Scenarios gives them.
var scenarios = []Scenario{
	described(noArgScenario(), "Bench/NoArg, JSON, no argument; the reply must be 42"),
	described(echoStringScenario("EchoString16", 16), "Bench/EchoString, a JSON string of 16 chars, echoed"),
	described(echoStringScenario("EchoString2000", 2000), "Bench/EchoString, a JSON string of 2000 chars, echoed"),
	described(multiArgsScenario(), "Bench/MultiArgs, five JSON arguments; the reply is builtin.MultiArgsResult of them"),
	described(echoPacketScenario("EchoPacket16", 16), "Bench/EchoPacket, 16 raw bytes, echoed byte for byte"),
	described(echoPacketScenario("EchoPacket2000", 2000), "Bench/EchoPacket, 2000 raw bytes, echoed byte for byte"),
	described(sumScenario(), "Math/Sum, JSON, a and b new on every call; reply a+b"),
}

// described returns sc with its line of description.
func described(sc Scenario, what string) Scenario {
	sc.What = what
	return sc
}

// Scenarios returns the named call scenarios, those of the NewLife.Remoting
// report and Sum, in the order rpcd bench -h lists them.
func Scenarios() []Scenario { return append([]Scenario(nil), scenarios...) }

// LookupScenario returns the named scenario called name, in any case.
func LookupScenario(name string) (Scenario, bool) {
	for _, sc := range scenarios {
		if strings.EqualFold(sc.Name, name) {
			return sc, true
		}
	}
	return Scenario{}, false
}

// ScenarioNames returns the names of the call scenarios, in table order.
func ScenarioNames() []string {
	names := make([]string, len(scenarios))
	for i, sc := range scenarios {
		names[i] = sc.Name
	}
	return names
}

// The names of the loads that are not calls, as their reports give them.
const (
	FanOutName         = "FanOut"         // FanOut: publish/subscribe
	StreamUploadName   = "StreamUpload"   // Stream with Upload: bytes to the server
	StreamDownloadName = "StreamDownload" // Stream without: bytes from the server
)

// wrongReply returns an ErrWrongReply with the details.
func wrongReply(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrWrongReply}, args...)...)
}

// noArgWant is Bench/NoArg's reply, decoded.
var noArgWant = func() int32 {
	n, err := strconv.ParseInt(builtin.NoArgReply, 10, 32)
	if err != nil {
		panic("rpcd: builtin.NoArgReply is not an int32: " + builtin.NoArgReply)
	}
	return int32(n)
}()

func noArgScenario() Scenario {
	return typedScenario("NoArg", builtin.NoArg, 0, func(int) *typedCall {
		var out int32
		return &typedCall{outp: &out,
			reset: func() { out = 0 },
			check: func() (int, error) {
				if out != noArgWant {
					return len(builtin.NoArgReply), wrongReply("%s returned %d, want %d", builtin.NoArg, out, noArgWant)
				}
				return len(builtin.NoArgReply), nil
			}}
	})
}

func echoStringScenario(name string, n int) Scenario {
	s := string(Pattern(n))
	return typedScenario(name, builtin.EchoString, n+2, func(int) *typedCall {
		var out string
		return &typedCall{in: s, outp: &out,
			reset: func() { out = "" },
			check: func() (int, error) {
				if out != s {
					return n + 2 + len(out) + 2, wrongReply("%s returned a string of %d bytes that differs from the %d sent", builtin.EchoString, len(out), n)
				}
				return 2 * (n + 2), nil
			}}
	})
}

// multiArgsIn is what MultiArgs sends: every field set, every number exact
// in a float64.
var multiArgsIn = builtin.MultiArgsIn{I32: 123456, I64: 1<<40 + 7, B: true, F64: 3.25, S: "NewLife.Remoting"}

func multiArgsScenario() Scenario {
	want := builtin.MultiArgsResult(multiArgsIn)
	req := mustJSON(multiArgsIn)
	reply := mustJSON(want)
	return typedScenario("MultiArgs", builtin.MultiArgs, len(req), func(int) *typedCall {
		args := multiArgsIn
		var out float64
		return &typedCall{in: &args, outp: &out,
			reset: func() { out = 0 },
			check: func() (int, error) {
				if out != want {
					return len(req) + len(reply), wrongReply("%s returned %v, want %v", builtin.MultiArgs, out, want)
				}
				return len(req) + len(reply), nil
			}}
	})
}

func echoPacketScenario(name string, n int) Scenario {
	sc := RawRoute(builtin.EchoPacket, Pattern(n), true)
	sc.Name, sc.custom = name, false
	return sc
}

func sumScenario() Scenario {
	size := len(mustJSON(builtin.SumArgs{})) // at its smallest; it varies
	return typedScenario("Sum", builtin.Sum, size, func(worker int) *typedCall {
		var args builtin.SumArgs
		var out, want, seq int64
		return &typedCall{in: &args, outp: &out,
			// a and b change on every call, and differ between callers;
			// b is negative on the first calls of all callers but the
			// first.
			next: func() {
				seq++
				args.A = int64(worker)*1_000_003 + seq
				args.B = seq*7 - int64(worker)
				want = args.A + args.B
			},
			reset: func() { out = 0 },
			check: func() (int, error) {
				n := len(`{"a":,"b":}`) + intLen(args.A) + intLen(args.B) + intLen(out)
				if out != want {
					return n, wrongReply("%s(%d, %d) returned %d, want %d", builtin.Sum, args.A, args.B, out, want)
				}
				return n, nil
			}}
	})
}

// RawRoute returns a scenario that sends payload raw to route with
// CallRaw; with echo, a reply must equal payload byte for byte. Its reports
// name the scenario "custom" (rpcd bench -route).
func RawRoute(route string, payload []byte, echo bool) Scenario {
	check := func(reply []byte) (int, error) {
		if echo && !bytes.Equal(reply, payload) {
			return len(payload) + len(reply), wrongReply("%s %s", route, echoDiff(reply, payload))
		}
		return len(payload) + len(reply), nil
	}
	return Scenario{Name: route, Route: route, Codec: "raw", Size: len(payload), custom: true,
		NewCall: func(cl Caller, _ int) Call {
			buf := make([]byte, 0, max(len(payload), 64)) // reused for every reply
			return func(ctx context.Context) (int, error) {
				reply, err := cl.CallRaw(ctx, route, payload, buf[:0])
				if err != nil {
					return 0, err
				}
				buf = reply // keep a buffer grown by a larger reply
				return check(reply)
			}
		},
		frames: func(int) frameCall { return frameCall{fixed: payload, check: check} }}
}

// JSONRoute returns a scenario that sends payload, JSON, to route with Call
// (no argument if payload is empty); with echo, a reply must equal payload
// byte for byte. Its reports name the scenario "custom" (rpcd bench -route
// -json-codec).
func JSONRoute(route string, payload []byte, echo bool) Scenario {
	check := func(out []byte) (int, error) {
		if echo && !bytes.Equal(out, payload) {
			return len(payload) + len(out), wrongReply("%s %s", route, echoDiff(out, payload))
		}
		return len(payload) + len(out), nil
	}
	return Scenario{Name: route, Route: route, Codec: "json", Size: len(payload), custom: true,
		NewCall: func(cl Caller, _ int) Call {
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
				return check(out)
			}
		},
		// As frames the payload goes as it is, and the reply is decoded
		// into a json.RawMessage as Call decodes it.
		frames: func(int) frameCall {
			var out json.RawMessage
			return frameCall{
				fixed: payload,
				check: func(reply []byte) (int, error) {
					out = out[:0]
					if err := transport.DecodeReplyWith(handler.JSON, route, reply, &out); err != nil {
						return 0, err
					}
					return check(out)
				}}
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

// Pattern returns n bytes of letters and digits: the payload of the named
// scenarios, and of rpcd bench -route -size N.
func Pattern(n int) []byte {
	const chars = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	b := make([]byte, n)
	for i := range b {
		b[i] = chars[i%len(chars)]
	}
	return b
}

// JSONString returns a JSON string of n letters and digits, n+2 bytes: the
// payload of rpcd bench -route -json-codec -size N+2.
func JSONString(n int) []byte {
	return append(append([]byte{'"'}, Pattern(n)...), '"')
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
