package load_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/load"
	"github.com/rpcd/rpcd/reactor"
)

// serve starts a server of the built-in routes on a loopback port, as
// `rpcd serve` has them, and returns its address and the function that
// stops it.
func serve(addr string, also func(*handler.Registry)) (string, func()) {
	reg := handler.NewRegistry()
	builtin.Register(reg)
	var srv *reactor.Server
	builtin.HandleStats(reg, func() int { return srv.Conns() })
	if also != nil {
		also(reg)
	}
	srv = reactor.New(reg, reactor.Options{Loops: 1})
	if err := srv.Start(addr); err != nil {
		log.Fatal(err)
	}
	return srv.Addr().String(), func() { _ = srv.Shutdown(context.Background()) }
}

// Bench loads a server with one of the named scenarios and reports what it
// measured; failed calls are counted in the report, not returned.
func ExampleBench() {
	addr, stop := serve("127.0.0.1:0", nil)
	defer stop()

	sc, _ := load.LookupScenario("EchoPacket16")
	r, err := load.Bench(context.Background(), load.Config{
		Addr:     addr,
		Scenario: sc,
		Conns:    2, // clients, each its own connection
		Inflight: 4, // callers on each
		Calls:    1000,
	})
	if err != nil {
		log.Fatal(err)
	}
	// r.WriteText(os.Stdout, 1) prints rpcd bench's table; r marshals to
	// its -json.
	fmt.Println(r.Calls, "calls,", r.Errors, "errors")
	// Output: 1000 calls, 0 errors
}

// RawRoute loads a route of the program's own; with echo, every reply must
// be the payload sent.
func ExampleRawRoute() {
	addr, stop := serve("127.0.0.1:0", func(reg *handler.Registry) {
		reg.HandleFunc("Bytes/Echo", func(_ context.Context, req, reply []byte) ([]byte, error) {
			return append(reply, req...), nil
		})
	})
	defer stop()

	r, err := load.Bench(context.Background(), load.Config{
		Addr:     addr,
		Scenario: load.RawRoute("Bytes/Echo", load.Pattern(100), true),
		Calls:    100,
		Timeout:  time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Settings.Scenario, r.Settings.Route, r.Calls, r.Errors)
	// Output: custom Bytes/Echo 100 0
}

// The seed table, as rpcd bench -matrix seed -runs 3 makes it: every
// load once per run, the runs interleaved so that a noisy moment hits all
// of them evenly, each load's median run reported.
func ExampleMatrix() {
	addr, stop := serve("127.0.0.1:0", nil)
	defer stop()

	seed := load.SeedMatrix()
	cfgs, err := seed.Configs(load.Config{Addr: addr, Duration: 2 * time.Second, Warmup: 500 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	const runs = 3
	made := make([][]*load.Report, len(cfgs))
	for range runs {
		for i, cfg := range cfgs {
			r, err := load.Bench(context.Background(), cfg)
			if err != nil {
				log.Fatal(err)
			}
			made[i] = append(made[i], r)
		}
	}
	var reports []*load.Report
	for _, rs := range made {
		reports = append(reports, load.Median(rs))
	}
	_ = seed.WriteText(os.Stdout, reports, runs)
}

// Soak holds connections at a steady rate, window by window, and judges
// whether the server stayed flat.
func ExampleSoak() {
	addr, stop := serve("127.0.0.1:0", nil)
	defer stop()

	rep, err := load.Soak(context.Background(), load.SoakConfig{
		Addr:     addr,
		Conns:    10,
		Rate:     20, // calls/s on each connection
		Duration: 400 * time.Millisecond,
		Every:    200 * time.Millisecond, // a window: figures, and a sample of the server
		// Connected and Window, if set, are told of the soak as it goes.
	})
	if err != nil {
		log.Fatal(err)
	}
	// rep.Passed() says whether every window made its calls and the server
	// stayed flat; rep.WriteText(os.Stdout) prints rpcd soak's report.
	fmt.Println(len(rep.Windows), "windows,", rep.Errors, "errors")
	// Output: 2 windows, 0 errors
}

// Chaos calls a server while a function of the program's own stops it and
// starts it again on the same address; the calls are then judged against
// the ledger the server kept.
func ExampleChaos() {
	fh, err := os.CreateTemp("", "chaos-ledger-")
	if err != nil {
		log.Fatal(err)
	}
	fh.Close()
	ledger := fh.Name()
	defer os.Remove(ledger)
	start := func(addr string) (string, func()) {
		var closeLedger func() error
		addr, stop := serve(addr, func(reg *handler.Registry) {
			var err error
			if closeLedger, err = load.HandleChaosRecord(reg, ledger); err != nil {
				log.Fatal(err)
			}
		})
		return addr, func() { stop(); _ = closeLedger() }
	}
	addr, stop := start("127.0.0.1:0")

	calls, err := load.Chaos(context.Background(), load.ChaosConfig{
		Addr:     addr,
		Client:   client.Options{Conns: 2, WaitForReady: true},
		Callers:  4,
		Duration: time.Second,
		Faults: func(ctx context.Context) error {
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(300 * time.Millisecond):
				}
				stop() // a drain; rpcd chaos also kills its child server
				_, stop = start(addr)
			}
		},
	})
	stop() // no call left running when the ledger is read
	if err != nil {
		log.Fatal(err)
	}
	rep, err := calls.Judge(ledger)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("calls that ran twice:", rep.RanTwice, "broken promises:", rep.BreachCount)
	// Output: calls that ran twice: 0 broken promises: 0
}
