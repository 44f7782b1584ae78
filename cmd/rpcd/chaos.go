package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/rpcd/rpcd/client"
	rpcdaemon "github.com/rpcd/rpcd/daemon"
	"github.com/rpcd/rpcd/load"
)

var chaosCmd = &command{
	name:     "chaos",
	synopsis: "[flags]",
	summary:  "kill and restart a server while clients call it; check no call ran twice",
	about: `Chaos starts this program as "rpcd serve -chaos-ledger FILE" on a port of
its own and has -callers goroutines call ` + load.ChaosRecord + ` over -conns
connections, each call with a key of its own, while it stops the server at
random (SIGKILL, or SIGTERM for a graceful drain with probability -term),
about every -kill-every, and starts it again on the same port after -down.
The client retries as it does for any user: only calls the server provably
never ran (refused while draining, never written, excluded by a GoAway),
and it waits for a connection (WaitForReady). The server appends each
key it runs to the ledger, which survives its deaths.

At the end, each call's outcome is checked against the ledger: a call that
got a reply ran exactly once; a call that failed as unprocessed never ran;
a call whose fate is unknown (the connection died while it was out) ran at
most once; every error is a typed rpcd error and came within the call's
-timeout. Any call that ran twice, or any other breach, is listed and
chaos exits 1.`,
	example: `rpcd chaos -d 60s -callers 32 -kill-every 1s
rpcd chaos -d 5m -term 0.5 -json`,
	setup: setupChaos,
}

// chaosFlags are chaos's flags.
type chaosFlags struct {
	duration  time.Duration
	callers   int
	conns     int
	timeout   time.Duration
	killEvery time.Duration
	down      time.Duration
	term      float64
	ledger    string
	jsonOut   bool
}

func setupChaos(fs *flag.FlagSet) func(*cli, []string) error {
	f := &chaosFlags{}
	fs.DurationVar(&f.duration, "d", 30*time.Second, "how long to call and kill")
	fs.IntVar(&f.callers, "callers", 16, "`N` goroutines calling without pause")
	fs.IntVar(&f.conns, "conns", 4, "`N` connections the calls are spread over")
	fs.DurationVar(&f.timeout, "timeout", 2*time.Second, "deadline of each call, retries and waits for a connection included")
	fs.DurationVar(&f.killEvery, "kill-every", time.Second, "mean time between stops of the server (each drawn from half to one and a half of it)")
	fs.DurationVar(&f.down, "down", 100*time.Millisecond, "how long the server stays down before it is started again")
	fs.Float64Var(&f.term, "term", 0.25, "the share of stops that are a SIGTERM (a drain) rather than a SIGKILL")
	fs.StringVar(&f.ledger, "ledger", "", "keep the ledger in this `file` (default: a temporary file, removed at the end)")
	fs.BoolVar(&f.jsonOut, "json", false, "write the report as JSON on standard output")
	return func(c *cli, args []string) error { return c.chaos(f, args) }
}

func (c *cli) chaos(f *chaosFlags, args []string) error {
	switch {
	case f.duration <= 0:
		return usagef("-d is %v, want more than 0", f.duration)
	case f.callers < 1 || f.conns < 1:
		return usagef("-callers and -conns want 1 or more")
	case f.timeout <= 0:
		return usagef("-timeout is %v, want more than 0", f.timeout)
	case f.killEvery <= 0 || f.down < 0:
		return usagef("-kill-every wants more than 0 and -down 0 or more")
	case f.term < 0 || f.term > 1:
		return usagef("-term is %v, want 0 to 1", f.term)
	}
	ctx, stop := c.interruptible()
	defer stop()

	ledger, removeLedger, err := load.NewLedger(f.ledger)
	if err != nil {
		return err
	}
	defer removeLedger()
	// On a port of its own, which Restart keeps.
	child, err := startServeChild(ctx, "-addr", "127.0.0.1:0", "-chaos-ledger", ledger, "-drain-timeout", "5s", "-log-level", "info")
	if err != nil {
		return err
	}
	addr := child.Addr()
	fmt.Fprintf(c.stderr, "chaos: server at %s, ledger %s, %v of calls from %d callers over %d connections\n", addr, ledger, f.duration, f.callers, f.conns)

	// The chaos, until the callers' time is up: the server killed or
	// drained at random, and started again on the same port.
	var stops map[string]int
	var restarts int
	faults := func(callCtx context.Context) (err error) {
		child, stops, restarts, err = rpcdaemon.Faults{Every: f.killEvery, Down: f.down, Term: f.term}.Run(callCtx, child)
		return err
	}
	calls, chaosErr := load.Chaos(ctx, load.ChaosConfig{
		Addr: addr,
		Client: client.Options{
			Conns:        f.conns,
			WaitForReady: true,
			MinBackoff:   10 * time.Millisecond,
			MaxBackoff:   200 * time.Millisecond,
			Logger:       quietLogger(c.stderr),
		},
		Callers: f.callers, Duration: f.duration, Timeout: f.timeout,
		Faults: faults,
	})
	if calls == nil { // not dialled
		_ = child.Stop()
		return chaosErr
	}
	if child != nil {
		if err := child.Stop(); err != nil && chaosErr == nil {
			chaosErr = err
		}
	}
	if chaosErr != nil {
		return chaosErr
	}
	if ctx.Err() != nil {
		return errors.New("rpcd: chaos interrupted")
	}

	rep, err := calls.Judge(ledger)
	if err != nil {
		return err
	}
	rep.Stops, rep.Restarts = stops, restarts
	if err := c.writeReport(rep, f.jsonOut); err != nil {
		return err
	}
	if !rep.Passed() {
		return exitStatus(exitFail)
	}
	return nil
}
