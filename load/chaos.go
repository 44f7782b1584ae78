package load

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// ChaosRecord is the route HandleChaosRecord registers (rpcd serve
// -chaos-ledger FILE): each run appends its argument, a call key, as a line
// of the ledger, so that Chaos's calls can be counted across restarts.
const ChaosRecord = "Chaos/Record"

// chaosKeyMax bounds a call key.
const chaosKeyMax = 64

// HandleChaosRecord registers ChaosRecord on reg, appending to file, and
// returns the function that closes the file. Each key is one write of a
// whole line under O_APPEND, in the file (the kernel's page cache, which
// outlives a SIGKILL) before the reply is sent, or the call fails.
func HandleChaosRecord(reg *handler.Registry, file string) (func() error, error) {
	fh, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("rpcd: opening the chaos ledger: %w", err)
	}
	var mu sync.Mutex
	reg.HandleFunc(ChaosRecord, func(_ context.Context, key, reply []byte) ([]byte, error) {
		if len(key) == 0 || len(key) > chaosKeyMax || bytes.IndexByte(key, '\n') >= 0 {
			return nil, handler.Errorf(proto.CodeInvalidArgument, "a chaos key is 1 to %d bytes without a newline", chaosKeyMax)
		}
		line := make([]byte, 0, len(key)+1)
		line = append(append(line, key...), '\n')
		mu.Lock()
		_, err := fh.Write(line)
		mu.Unlock()
		if err != nil {
			return nil, handler.Errorf(proto.CodeInternal, "writing the chaos ledger: %v", err)
		}
		return append(reply, "ok"...), nil
	}, handler.Blocking())
	return fh.Close, nil
}

// ChaosConfig is a chaos run for Chaos: Callers goroutines call
// ChaosRecord at Addr through one client, each call with a key of its own,
// for Duration, while Faults stops and restarts the server.
type ChaosConfig struct {
	// Addr is the server, which serves ChaosRecord (HandleChaosRecord) and
	// comes back on the same address after each fault.
	Addr string
	// Client is the options of the one client the calls share. rpcd chaos
	// gives it 4 connections, WaitForReady, and backoffs of 10 to 200 ms:
	// a client as a user would have, whose retries are what is checked.
	Client client.Options

	Callers  int           // goroutines calling without pause; 16 if 0
	Duration time.Duration // how long to call; 30 s if 0
	Timeout  time.Duration // each call's deadline, retries and waits included; 2 s if 0

	// Faults runs while the calls go on, until its ctx ends with Duration
	// (or the ctx of Chaos ends): it stops the server (a SIGKILL, a
	// drain, ...) and starts it again, as often as it likes. An error it
	// returns stops it, not the calls; Chaos returns it.
	Faults func(ctx context.Context) error
}

// chaosOutcome is how one call ended, as its caller saw it.
type chaosOutcome struct {
	code        proto.Code // CodeOK for a reply
	unprocessed bool       // the error said the server never ran it
	untyped     string     // an error that is not a *handler.Error: its text
	late        bool       // it returned well after its deadline
}

// ChaosCalls are the calls of a chaos run, as their callers saw them end,
// to be judged against the ledger once the server has stopped.
type ChaosCalls struct {
	duration time.Duration
	outcomes [][]chaosOutcome // by caller, then sequence number
}

// Chaos dials cfg.Addr and calls ChaosRecord from cfg.Callers goroutines
// for cfg.Duration, with keys "CALLER-SEQ", while cfg.Faults runs, and
// returns how each call ended. An error from dialling returns no calls; an
// error from Faults returns the calls with it. Stop the server, so that
// no call is left running, before judging them (ChaosCalls.Judge).
func Chaos(ctx context.Context, cfg ChaosConfig) (*ChaosCalls, error) {
	switch {
	case cfg.Addr == "":
		return nil, errors.New("rpcd: load: no Addr")
	case cfg.Callers < 0 || cfg.Duration < 0 || cfg.Timeout < 0:
		return nil, errors.New("rpcd: load: a negative Callers, Duration or Timeout")
	}
	if cfg.Callers == 0 {
		cfg.Callers = 16
	}
	if cfg.Duration == 0 {
		cfg.Duration = 30 * time.Second
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	cl, err := client.Dial(ctx, cfg.Addr, cfg.Client)
	if err != nil {
		return nil, err
	}

	// The callers.
	calls := &ChaosCalls{duration: cfg.Duration, outcomes: make([][]chaosOutcome, cfg.Callers)}
	callCtx, stopCalls := context.WithTimeout(ctx, cfg.Duration)
	defer stopCalls()
	var wg sync.WaitGroup
	for i := range cfg.Callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			calls.outcomes[i] = chaosCaller(callCtx, cl, i, cfg.Timeout)
		}()
	}

	// The chaos, until the callers' time is up.
	var faultErr error
	if cfg.Faults != nil {
		faultErr = cfg.Faults(callCtx)
	}
	wg.Wait()
	cl.Close()
	return calls, faultErr
}

// chaosCaller calls ChaosRecord with keys "i-0", "i-1", ... until ctx
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
		reply, err = cl.CallRaw(cctx, ChaosRecord, key, reply[:0])
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

// ChaosReport is what a chaos run found, with the field names of rpcd
// chaos -json.
type ChaosReport struct {
	Duration    string         `json:"duration"`
	Calls       int            `json:"calls"`
	Replies     int            `json:"replies"`
	Errors      map[string]int `json:"errors_by_code"`
	Unprocessed int            `json:"errors_unprocessed"`   // errors the client knew did not run
	UnknownRan  int            `json:"unknown_fate_ran"`     // errors of unknown fate that had run
	UnknownNot  int            `json:"unknown_fate_not_run"` // and that had not
	// The faults, by signal ("killed", "terminated"), and the restarts:
	// Judge leaves them empty for whoever made the faults to fill in.
	Stops       map[string]int `json:"stops"`
	Restarts    int            `json:"restarts"`
	LedgerLines int            `json:"ledger_lines"`
	Breaches    []string       `json:"breaches"` // each broken promise, at most 20; never null
	BreachCount int            `json:"breach_count"`
	RanTwice    int            `json:"ran_twice"`
}

// MarshalJSON writes r with Breaches an array even when empty.
func (r ChaosReport) MarshalJSON() ([]byte, error) {
	type plain ChaosReport // without this method
	if r.Breaches == nil {
		r.Breaches = []string{}
	}
	return json.Marshal(plain(r))
}

// Passed reports whether every promise held.
func (r *ChaosReport) Passed() bool { return r.BreachCount == 0 }

// chaosMaxBreaches bounds the breaches listed one by one.
const chaosMaxBreaches = 20

// Judge checks each call against the ledger, the file the server appended
// each key it ran to: a call that got a reply ran exactly once; a call
// that failed as unprocessed never ran; a call whose fate is unknown (its
// connection died while it was out) ran at most once; every error is a
// typed rpcd error that came within the call's timeout; and the ledger
// holds no key no caller sent. Each broken promise is a breach.
func (c *ChaosCalls) Judge(ledger string) (*ChaosReport, error) {
	counts, lines, err := readLedger(ledger)
	if err != nil {
		return nil, err
	}
	rep := &ChaosReport{Duration: c.duration.String(), Errors: map[string]int{}, Stops: map[string]int{}, LedgerLines: lines}
	judgeChaos(rep, c.outcomes, counts)
	return rep, nil
}

// judgeChaos fills rep from the outcomes the callers saw and the number of
// times the ledger says each call ran (by caller, then sequence number).
func judgeChaos(rep *ChaosReport, outcomes [][]chaosOutcome, ran map[[2]int]int) {
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

// NewLedger readies the ledger a server serving ChaosRecord appends to
// (rpcd serve -chaos-ledger FILE): file emptied, or with file "" a new
// temporary file. It returns the ledger's name and the function that
// removes it when temporary (a no-op otherwise).
func NewLedger(file string) (name string, remove func(), err error) {
	if file != "" {
		if err := os.WriteFile(file, nil, 0o644); err != nil {
			return "", nil, fmt.Errorf("rpcd: creating the ledger: %w", err)
		}
		return file, func() {}, nil
	}
	fh, err := os.CreateTemp("", "rpcd-chaos-ledger-")
	if err != nil {
		return "", nil, fmt.Errorf("rpcd: creating the ledger: %w", err)
	}
	fh.Close()
	return fh.Name(), func() { os.Remove(fh.Name()) }, nil
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

// WriteText writes r as rpcd chaos prints it: a table of the stops, the
// calls and how they ended, then each breach.
func (r *ChaosReport) WriteText(w io.Writer) error {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "duration\t%s\n", r.Duration)
	fmt.Fprintf(tw, "server stops\t%d SIGKILL, %d SIGTERM; %d restarts\n", r.Stops["killed"], r.Stops["terminated"], r.Restarts)
	fmt.Fprintf(tw, "calls\t%d\n", r.Calls)
	fmt.Fprintf(tw, "replies\t%d\n", r.Replies)
	codes := make([]string, 0, len(r.Errors))
	for code := range r.Errors {
		codes = append(codes, code)
	}
	sort.Strings(codes)
	for _, code := range codes {
		fmt.Fprintf(tw, "errors: %s\t%d\n", code, r.Errors[code])
	}
	fmt.Fprintf(tw, "  known unprocessed (never ran)\t%d\n", r.Unprocessed)
	fmt.Fprintf(tw, "  fate unknown: ran once\t%d\n", r.UnknownRan)
	fmt.Fprintf(tw, "  fate unknown: never ran\t%d\n", r.UnknownNot)
	fmt.Fprintf(tw, "ledger lines\t%d\n", r.LedgerLines)
	fmt.Fprintf(tw, "calls that ran twice\t%d\n", r.RanTwice)
	fmt.Fprintf(tw, "broken promises\t%d\n", r.BreachCount)
	tw.Flush()
	for _, br := range r.Breaches {
		fmt.Fprintf(&b, "  %s\n", br)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
