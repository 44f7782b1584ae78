package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

var chaosCmd = &command{
	name:     "chaos",
	synopsis: "[flags]",
	summary:  "kill and restart a server while clients call it; check no call ran twice",
	about: `Chaos starts this program as "rpcd serve -chaos-ledger FILE" on a port of
its own and has -callers goroutines call ` + chaosRecord + ` over -conns
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

// chaosOutcome is how one call ended, as its caller saw it.
type chaosOutcome struct {
	code        proto.Code // CodeOK for a reply
	unprocessed bool       // the error said the server never ran it
	untyped     string     // an error that is not a *handler.Error: its text
	late        bool       // it returned well after its deadline
}

// chaosReport is what a chaos run found.
type chaosReport struct {
	Duration    string         `json:"duration"`
	Calls       int            `json:"calls"`
	Replies     int            `json:"replies"`
	Errors      map[string]int `json:"errors_by_code"`
	Unprocessed int            `json:"errors_unprocessed"`   // errors the client knew did not run
	UnknownRan  int            `json:"unknown_fate_ran"`     // errors of unknown fate that had run
	UnknownNot  int            `json:"unknown_fate_not_run"` // and that had not
	Stops       map[string]int `json:"stops"`                // by signal
	Restarts    int            `json:"restarts"`
	LedgerLines int            `json:"ledger_lines"`
	Breaches    []string       `json:"breaches"` // each broken promise, at most chaosMaxBreaches
	BreachCount int            `json:"breach_count"`
	RanTwice    int            `json:"ran_twice"`
}

// chaosMaxBreaches bounds the breaches listed one by one.
const chaosMaxBreaches = 20

func (c *cli) chaos(f *chaosFlags, args []string) error {
	switch {
	case len(args) > 0:
		return usagef("unexpected argument %q", args[0])
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

	ledger := f.ledger
	if ledger == "" {
		fh, err := os.CreateTemp("", "rpcd-chaos-ledger-")
		if err != nil {
			return fmt.Errorf("rpcd: creating the ledger: %w", err)
		}
		fh.Close()
		ledger = fh.Name()
		defer os.Remove(ledger)
	} else if err := os.WriteFile(ledger, nil, 0o644); err != nil {
		return fmt.Errorf("rpcd: creating the ledger: %w", err)
	}
	addr, err := freePort()
	if err != nil {
		return err
	}
	serverArgs := []string{"-addr", addr, "-chaos-ledger", ledger, "-drain-timeout", "5s", "-log-level", "info"}
	child, err := startServeChild(ctx, serverArgs...)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stderr, "chaos: server at %s, ledger %s, %v of calls from %d callers over %d connections\n", addr, ledger, f.duration, f.callers, f.conns)

	cl, err := client.Dial(ctx, addr, client.Options{
		Conns:        f.conns,
		WaitForReady: true,
		MinBackoff:   10 * time.Millisecond,
		MaxBackoff:   200 * time.Millisecond,
		Logger:       quietLogger(c.stderr),
	})
	if err != nil {
		_ = child.stop()
		return err
	}

	// The callers.
	outcomes := make([][]chaosOutcome, f.callers)
	callCtx, stopCalls := context.WithTimeout(ctx, f.duration)
	defer stopCalls()
	var wg sync.WaitGroup
	for i := range f.callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outcomes[i] = chaosCaller(callCtx, cl, i, f.timeout)
		}()
	}

	// The chaos, until the callers' time is up.
	rep := &chaosReport{Duration: f.duration.String(), Errors: map[string]int{}, Stops: map[string]int{}}
	var chaosErr error
	for chaosErr == nil {
		wait := time.Duration(float64(f.killEvery) * (0.5 + rand.Float64()))
		select {
		case <-callCtx.Done():
		case <-time.After(wait):
		}
		if callCtx.Err() != nil {
			break
		}
		sig := syscall.SIGKILL
		if rand.Float64() < f.term {
			sig = syscall.SIGTERM
		}
		child.signal(sig)
		rep.Stops[sig.String()]++
		select {
		case <-callCtx.Done():
		case <-time.After(f.down):
		}
		child, chaosErr = restartChild(ctx, serverArgs)
		if chaosErr == nil {
			rep.Restarts++
		}
	}
	wg.Wait()
	cl.Close()
	if child != nil {
		if err := child.stop(); err != nil && chaosErr == nil {
			chaosErr = err
		}
	}
	if chaosErr != nil {
		return chaosErr
	}
	if ctx.Err() != nil {
		return errors.New("rpcd: chaos interrupted")
	}

	counts, lines, err := readLedger(ledger)
	if err != nil {
		return err
	}
	rep.LedgerLines = lines
	judgeChaos(rep, outcomes, counts)
	if err := c.writeChaos(rep, f.jsonOut); err != nil {
		return err
	}
	if rep.BreachCount > 0 {
		return exitStatus(exitFail)
	}
	return nil
}

// chaosCaller calls Chaos/Record with keys "i-0", "i-1", ... until ctx
// ends, and returns how each call ended.
func chaosCaller(ctx context.Context, cl *client.Client, i int, timeout time.Duration) []chaosOutcome {
	var out []chaosOutcome
	key := make([]byte, 0, 32)
	var reply []byte
	for seq := 0; ctx.Err() == nil; seq++ {
		key = strconv.AppendInt(append(strconv.AppendInt(key[:0], int64(i), 10), '-'), int64(seq), 10)
		cctx, cancel := context.WithTimeout(context.Background(), timeout) // not ctx: the last calls end on their own
		begin := time.Now()
		var err error
		reply, err = cl.CallRaw(cctx, chaosRecord, key, reply[:0])
		took := time.Since(begin)
		cancel()
		var o chaosOutcome
		o.late = took > timeout+time.Second
		if err != nil {
			var e *handler.Error
			if errors.As(err, &e) {
				o.code, o.unprocessed = e.Code, e.Unprocessed
			} else {
				o.code, o.untyped = proto.CodeUnknown, err.Error()
			}
		} else if string(reply) != "ok" {
			o.code, o.untyped = proto.CodeUnknown, fmt.Sprintf("reply %q, want \"ok\"", reply)
		}
		out = append(out, o)
	}
	return out
}

// judgeChaos fills rep from the outcomes the callers saw and the number of
// times the ledger says each call ran (by caller, then sequence number).
func judgeChaos(rep *chaosReport, outcomes [][]chaosOutcome, ran map[[2]int]int) {
	breach := func(format string, args ...any) {
		rep.BreachCount++
		if len(rep.Breaches) < chaosMaxBreaches {
			rep.Breaches = append(rep.Breaches, fmt.Sprintf(format, args...))
		}
	}
	for i, calls := range outcomes {
		for seq, o := range calls {
			rep.Calls++
			n := ran[[2]int{i, seq}]
			key := fmt.Sprintf("%d-%d", i, seq)
			if n > 1 {
				rep.RanTwice++
				breach("call %s ran %d times", key, n)
			}
			switch {
			case o.untyped != "":
				breach("call %s ended with an untyped error: %s", key, o.untyped)
			case o.code == proto.CodeOK:
				rep.Replies++
				if n == 0 {
					breach("call %s got a reply but never ran", key)
				}
			default:
				rep.Errors[o.code.String()]++
				switch {
				case o.unprocessed:
					rep.Unprocessed++
					if n > 0 {
						breach("call %s failed as unprocessed (%v) but ran", key, o.code)
					}
				case n > 0:
					rep.UnknownRan++
				default:
					rep.UnknownNot++
				}
			}
			if o.late {
				breach("call %s returned more than a second past its deadline", key)
			}
			delete(ran, [2]int{i, seq})
		}
	}
	for k, n := range ran {
		breach("the ledger has %d-%d (%d times), a call no caller made", k[0], k[1], n)
	}
	sort.Strings(rep.Breaches)
}

// readLedger counts the lines of the ledger by key.
func readLedger(file string) (map[[2]int]int, int, error) {
	fh, err := os.Open(file)
	if err != nil {
		return nil, 0, fmt.Errorf("rpcd: reading the ledger: %w", err)
	}
	defer fh.Close()
	counts := map[[2]int]int{}
	lines := 0
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		lines++
		a, b, ok := strings.Cut(sc.Text(), "-")
		i, err1 := strconv.Atoi(a)
		seq, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil {
			return nil, 0, fmt.Errorf("rpcd: the ledger's line %d, %q, is not a call key", lines, sc.Text())
		}
		counts[[2]int{i, seq}]++
	}
	return counts, lines, sc.Err()
}

// restartChild starts the server again on the same address; the port may
// take a moment to be free after a kill.
func restartChild(ctx context.Context, args []string) (*serveChild, error) {
	var err error
	for range 20 {
		var ch *serveChild
		if ch, err = startServeChild(ctx, args...); err == nil {
			return ch, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil, err
}

// freePort returns a loopback address with a port nothing listens on now.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("rpcd: finding a free port: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr, nil
}

func (c *cli) writeChaos(rep *chaosReport, jsonOut bool) error {
	if jsonOut {
		if rep.Breaches == nil {
			rep.Breaches = []string{}
		}
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		return c.write(append(b, '\n'))
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "duration\t%s\n", rep.Duration)
	fmt.Fprintf(tw, "server stops\t%d SIGKILL, %d SIGTERM; %d restarts\n", rep.Stops["killed"], rep.Stops["terminated"], rep.Restarts)
	fmt.Fprintf(tw, "calls\t%d\n", rep.Calls)
	fmt.Fprintf(tw, "replies\t%d\n", rep.Replies)
	codes := make([]string, 0, len(rep.Errors))
	for code := range rep.Errors {
		codes = append(codes, code)
	}
	sort.Strings(codes)
	for _, code := range codes {
		fmt.Fprintf(tw, "errors: %s\t%d\n", code, rep.Errors[code])
	}
	fmt.Fprintf(tw, "  known unprocessed (never ran)\t%d\n", rep.Unprocessed)
	fmt.Fprintf(tw, "  fate unknown: ran once\t%d\n", rep.UnknownRan)
	fmt.Fprintf(tw, "  fate unknown: never ran\t%d\n", rep.UnknownNot)
	fmt.Fprintf(tw, "ledger lines\t%d\n", rep.LedgerLines)
	fmt.Fprintf(tw, "calls that ran twice\t%d\n", rep.RanTwice)
	fmt.Fprintf(tw, "broken promises\t%d\n", rep.BreachCount)
	tw.Flush()
	for _, br := range rep.Breaches {
		fmt.Fprintf(&b, "  %s\n", br)
	}
	return c.write([]byte(b.String()))
}
