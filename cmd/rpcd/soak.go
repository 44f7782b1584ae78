package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/load"
	"github.com/rpcd/rpcd/proto"
)

var soakCmd = &command{
	name:     "soak",
	synopsis: "[flags]",
	summary:  "hold many connections at a steady rate; check errors, memory and goroutines stay flat",
	about: `Soak opens -c connections and calls -scenario on every one -rate
times a second (open loop: each call at its scheduled time, its latency
counted from then), for -d after -warmup. A call goes at its time behind
those of its connection still unanswered, up to -pipeline in flight; past
that it waits for an answer, late, and calls a connection finds due
together go in one write. Each connection is a client, its calls
asynchronous (a client.Pipe), paced from a few goroutines over timing
wheels, the connections read by the client's event loops
(client.Options.EventLoops), about 9 KiB resident a connection. Every
-every it reports the window's calls/s, errors and latency, and samples
the server through ` + builtin.Stats + `: heap in use, resident memory,
goroutines and connections. Before the load it samples the server idle and then with all
connections open, and reports the server's memory per connection, this
program's, and both sides' CPU per call.

Without -addr it starts this program as "rpcd serve" in a child process,
with -max-conns raised to fit -c. A server at -addr must answer every
connection's first Ping within a second, serve ` + builtin.Stats + ` (rpcd
serve does) and allow -c connections.

Soak passes when no call failed, every window after the warm-up made at
least 98% of the calls asked for (short of that, the machine cannot drive
the load, and the windows' latencies hide a growing backlog), and the
server stayed flat after the warm-up: the peaks of heap in use, resident
memory and goroutines in the second half of the windows are at most 10%
(and 8 MiB, or 16 goroutines) above those of the first half. Otherwise it
says what failed and exits 1.`,
	example: `rpcd soak -c 1000 -rate 100 -d 5m
rpcd soak -c 10000 -rate 10 -d 2m -json
rpcd soak -c 100 -rate 50 -d 1m -scenario EchoString2000 -compress zstd`,
	setup: setupSoak,
}

// soakFlags are soak's flags.
type soakFlags struct {
	addr     string
	scenario string
	conns    int
	rate     float64
	pipeline int
	duration time.Duration
	warmup   time.Duration
	every    time.Duration
	timeout  time.Duration
	jsonOut  bool
	sec      clientSecurityFlags
	compress compressFlag
}

func setupSoak(fs *flag.FlagSet) func(*cli, []string) error {
	f := &soakFlags{}
	fs.StringVar(&f.addr, "addr", "", "server `address`; empty starts a child \"rpcd serve\" on 127.0.0.1:0")
	fs.StringVar(&f.scenario, "scenario", "EchoPacket16", "`name` of the load, as in rpcd bench")
	fs.IntVar(&f.conns, "c", 1000, "`N` connections, one caller each")
	fs.Float64Var(&f.rate, "rate", 100, "calls per second on each connection")
	fs.IntVar(&f.pipeline, "pipeline", load.DefaultPipeline, "`N` calls in flight at most on a connection: each goes at its time while fewer are unanswered; 1 waits for each answer")
	fs.DurationVar(&f.duration, "d", 5*time.Minute, "how long to measure after the warm-up")
	fs.DurationVar(&f.warmup, "warmup", 30*time.Second, "how long to call before judging flatness (its windows are reported too)")
	fs.DurationVar(&f.every, "every", 10*time.Second, "the length of a window: a report line and a sample of the server")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Second, "deadline of each call, and bound on connecting")
	fs.BoolVar(&f.jsonOut, "json", false, "write the report as JSON on standard output")
	f.sec.define(fs)
	f.compress.define(fs)
	return func(c *cli, args []string) error { return c.soak(f, args) }
}

func (c *cli) soak(f *soakFlags, args []string) error {
	sc, ok := load.LookupScenario(f.scenario)
	switch {
	case !ok:
		return usagef("-scenario is %q, want one of %s", f.scenario, strings.Join(load.ScenarioNames(), ", "))
	case f.conns < 1:
		return usagef("-c is %d, want 1 or more", f.conns)
	case f.rate <= 0:
		return usagef("-rate is %v, want more than 0", f.rate)
	case f.pipeline < 1:
		return usagef("-pipeline is %d, want 1 or more", f.pipeline)
	case f.duration <= 0 || f.warmup < 0 || f.every <= 0:
		return usagef("-d and -every want more than 0, -warmup 0 or more")
	case f.every > f.duration:
		return usagef("-every %v is longer than -d %v", f.every, f.duration)
	case f.timeout <= 0:
		return usagef("-timeout is %v, want more than 0", f.timeout)
	case f.addr == "" && f.sec.given():
		return usagef("the TLS and token flags go with -addr: the server soak starts itself serves plain TCP without authentication")
	}
	ctx, stop := c.interruptible()
	defer stop()

	target, stopTarget, err := c.loadTarget(ctx, f.addr, "-max-conns", strconv.Itoa(f.conns+16))
	if err != nil {
		return err
	}
	defer stopTarget()
	compressed := ""
	if name := f.compress.name; name != "" && name != "none" {
		compressed = " (compressed: " + name + ")"
	}
	fmt.Fprintf(c.stderr, "soak: %s%s on %d connections × %v calls/s for %v after %v, server %s\n", sc.Name, compressed, f.conns, f.rate, f.duration, f.warmup, target)

	opts, err := c.clientOptions(f.timeout, proto.DefaultMaxFrameSize, &f.sec, &f.compress)
	if err != nil {
		return err
	}
	cfg := load.SoakConfig{
		Addr: target.addr, Server: target.String(), Client: opts,
		Scenario: sc, Conns: f.conns, Rate: f.rate, Pipeline: f.pipeline,
		Duration: f.duration, Warmup: f.warmup, Every: f.every, Timeout: f.timeout,
		Connected: func(rep *load.SoakReport) { fmt.Fprintf(c.stderr, "soak: %s\n", rep.ConnectedText()) },
	}
	if !f.jsonOut {
		cfg.Window = func(w load.SoakWindow) { fmt.Fprintf(c.stderr, "soak: %s\n", w) }
	}
	rep, err := load.Soak(ctx, cfg)
	if rep == nil {
		return err
	}
	if err := c.writeReport(rep, f.jsonOut); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return errors.New("rpcd: soak interrupted; the report covers the windows until then")
	}
	if !rep.Passed() {
		return exitStatus(exitFail)
	}
	return nil
}
