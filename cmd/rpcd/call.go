package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/load"
	"github.com/rpcd/rpcd/proto"
)

var callCmd = &command{
	name:     "call",
	synopsis: "[flags] ROUTE [ARG]",
	summary:  "call a route and print its reply",
	about: `Call calls ROUTE on the server at -addr, or on a node of the service it
names (etcd://ENDPOINTS/NAME, dns:///HOST:PORT, static://ADDR,ADDR/NAME),
and writes the reply to standard output. ARG is a JSON value, checked
before it is sent; "-" reads it from standard input; without ARG the call
carries no argument. The JSON reply is printed as the server sent it,
followed by a newline. With -raw, ARG is sent as raw bytes (codec raw) and
the reply is written as it came. A failed call prints the error, as in
"rpcd: not found: no route No/Such", and exits 1. An address that is not
an rpcd server (an HTTP or TLS port, one that says nothing) is named
within a second.`,
	example: `rpcd call Math/Sum '{"a":1,"b":2}'
echo -n hello | rpcd call -raw Bench/EchoPacket -
rpcd call -addr 10.0.0.7:7070 -timeout 1s -meta trace-id=abc123 Sys/Ping
rpcd call -addr etcd://10.0.0.1:2379/echo Math/Sum '{"a":1,"b":2}'`,
	setup: setupCall,
	args:  true,
}

// dialFlags are the flags of the commands that call a server.
type dialFlags struct {
	addr     string
	timeout  time.Duration
	maxFrame int
	sec      clientSecurityFlags
	compress compressFlag // defined by the commands that take it
}

// define adds the flags to fs.
func (d *dialFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&d.addr, "addr", defaultAddr, "server `address`: host:port, or unix:///path")
	fs.DurationVar(&d.timeout, "timeout", 5*time.Second, "bound on connecting and calling together")
	fs.IntVar(&d.maxFrame, "max-frame", proto.DefaultMaxFrameSize, "largest frame sent or read, header included, in `bytes`; match the server's")
	d.sec.define(fs)
}

// check reports a flag value that cannot work.
func (d *dialFlags) check() error {
	if d.timeout <= 0 {
		return usagef("-timeout is %v, want more than 0", d.timeout)
	}
	if d.maxFrame < proto.HeaderSize {
		return usagef("-max-frame is %d, want at least %d", d.maxFrame, proto.HeaderSize)
	}
	return nil
}

// dial connects to the server named by d within ctx; each also may set
// more of the client's options.
func (c *cli) dial(ctx context.Context, d *dialFlags, also ...func(*client.Options)) (*client.Client, error) {
	opts, err := c.clientOptions(d.timeout, d.maxFrame, &d.sec, &d.compress)
	if err != nil {
		return nil, err
	}
	for _, f := range also {
		f(&opts)
	}
	return client.Dial(ctx, d.addr, opts)
}

// probeTimeout is how long the commands that call a server wait for its
// answer to the Ping each of their connections begins with: something
// that is not rpcd (an HTTP or TLS port, a silent one) is named at once,
// not found out when a call's -timeout has passed.
const probeTimeout = time.Second

// quietLogger is the clients' logger: warnings and errors only (the client
// logs its reconnection attempts at debug level).
func quietLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// metaFlag collects -meta key=value pairs.
type metaFlag [][2]string

func (m *metaFlag) String() string {
	var b strings.Builder
	for i, kv := range *m {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(kv[0] + "=" + kv[1])
	}
	return b.String()
}

// Set checks what proto.AppendMetadata would otherwise panic on.
func (m *metaFlag) Set(s string) error {
	k, v, err := proto.ParsePair(s)
	if err == nil {
		*m = append(*m, [2]string{k, v})
	}
	return err
}

// callFlags are call's flags.
type callFlags struct {
	dialFlags
	raw  bool
	meta metaFlag
	etcd etcdAccessFlags // for an etcd:// -addr

	balance balanceFlags // for a service -addr
}

// setupCall defines call's flags; see command.setup.
func setupCall(fs *flag.FlagSet) func(*cli, []string) error {
	f := &callFlags{}
	f.define(fs)
	fs.Lookup("addr").Usage = "server `address`: host:port or unix:///path; or a service, etcd://ENDPOINTS/NAME, dns://[SERVER]/HOST:PORT (its A records; a name without port: its SRV records) or static://ADDR,ADDR/NAME, called on one of its nodes"
	f.etcd.define(fs, "with an etcd:// -addr")
	f.balance.define(fs, "with -balance hash: the call's `key`: calls with the same key go to the same node")
	f.compress.define(fs)
	fs.BoolVar(&f.raw, "raw", false, "send ARG as raw bytes (codec raw) and write the reply as it is")
	fs.Var(&f.meta, "meta", "add `key=value` to the call's metadata; repeatable")
	return func(c *cli, args []string) error { return c.call(f, args) }
}

func (c *cli) call(f *callFlags, args []string) error {
	if len(args) < 1 || len(args) > 2 {
		return usagef("want ROUTE and at most one ARG, got %d arguments", len(args))
	}
	if err := f.check(); err != nil {
		return err
	}
	if err := f.etcd.checkTarget(f.addr); err != nil {
		return err
	}
	if err := f.balance.check(f.addr); err != nil {
		return err
	}
	route := args[0]
	if err := handler.ValidRoute(route); err != nil {
		return usagef("%v", strings.TrimPrefix(err.Error(), "rpcd: "))
	}
	var arg []byte
	hasArg := len(args) == 2
	if hasArg {
		arg = []byte(args[1])
		if args[1] == "-" {
			// No frame can carry more than the limit; do not read past it.
			b, err := io.ReadAll(io.LimitReader(c.stdin, proto.DefaultMaxFrameSize+1))
			switch {
			case err != nil:
				return fmt.Errorf("rpcd: reading ARG from standard input: %w", err)
			case len(b) > proto.DefaultMaxFrameSize:
				return fmt.Errorf("rpcd: ARG on standard input exceeds the frame limit of %d bytes", proto.DefaultMaxFrameSize)
			}
			arg = b
		}
		if !f.raw {
			if err := checkJSON("ARG", arg); err != nil {
				return err
			}
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	cl, err := c.dialCaller(ctx, f)
	if err != nil {
		return err
	}
	defer cl.Close()
	for _, kv := range f.meta {
		ctx = client.WithMetadata(ctx, kv[0], kv[1])
	}

	if f.raw {
		reply, err := cl.CallRaw(ctx, route, arg, nil)
		if err != nil {
			return err
		}
		return c.write(reply)
	}
	var in any // nil: no payload
	if hasArg {
		in = json.RawMessage(arg)
	}
	var out json.RawMessage
	if err := cl.Call(ctx, route, in, &out); err != nil {
		return err
	}
	if len(out) == 0 {
		return nil // a route that replies with nothing
	}
	return c.write(append(out, '\n'))
}

// dialCaller connects to the server, or the service, f.addr names: a
// *client.Client to one server, or a *client.Cluster spreading calls over
// a service's nodes, both load.Callers.
func (c *cli) dialCaller(ctx context.Context, f *callFlags) (interface {
	load.Caller
	io.Closer
}, error) {
	if !client.IsService(f.addr) {
		return c.dial(ctx, &f.dialFlags)
	}
	o, err := c.clientOptions(f.timeout, f.maxFrame, &f.sec, &f.compress)
	if err != nil {
		return nil, err
	}
	opts := client.ServiceOptions{Options: o}
	if err := f.etcd.cfg.RegisterEtcdScheme(); err != nil {
		return nil, err
	}
	f.balance.apply(&opts, 0)
	return client.DialService(ctx, f.addr, opts)
}

// checkJSON refuses, as a usage error, an argument named what that is not
// one JSON value, in the words a server uses for one ("not valid JSON:
// unexpected '}' at byte 8, where a key belongs").
func checkJSON(what string, b []byte) error {
	if err := handler.JSON.Unmarshal(b, new(json.RawMessage)); err != nil {
		return usagef("%s: %v; use -raw to send bytes", what, err)
	}
	return nil
}

// write writes b to standard output.
func (c *cli) write(b []byte) error {
	if _, err := c.stdout.Write(b); err != nil {
		return fmt.Errorf("rpcd: writing the reply: %w", err)
	}
	return nil
}
