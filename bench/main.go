// Command bench compares rpcd with peer Go RPC frameworks (gRPC, net/rpc,
// rpcx, arpc, drpc, Kitex) and two floors (bare TCP, bare gnet) side by side: every
// system echoes the same payloads in the same cells, servers in a separate
// process, figures the median of several interleaved runs, one table per
// cell. See README.md.
//
//	go run . -d 3s -json results.json   # everything
//	go run . -smoke                     # every system, 100 tiny calls each
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"
)

func main() {
	if isServeMode(os.Args[1:]) {
		os.Exit(serveMain(os.Args[1:]))
	}
	os.Exit(benchMain(os.Args[1:], os.Stdout, os.Stderr))
}

// settings are a run's flags, as recorded in the JSON.
type settings struct {
	Duration string   `json:"duration"`
	Warmup   string   `json:"warmup"`
	Runs     int      `json:"runs"`
	Server   string   `json:"server"` // "separate process" or "in-process"
	Cells    []string `json:"cells"`
	Systems  []string `json:"systems"`
	Command  string   `json:"command"`
	Started  string   `json:"started"`
}

func benchMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	d := fs.Duration("d", 3*time.Second, "measured `duration` of each system in each cell, per run")
	warmup := fs.Duration("warmup", 500*time.Millisecond, "warm-up `duration` before each measurement, not counted")
	runs := fs.Int("runs", 3, "runs of each cell; figures are the median over runs")
	cellsFlag := fs.String("cells", "all", "comma-separated `cells` to run (see -list)")
	systemsFlag := fs.String("systems", "all", "comma-separated `systems` to run (see -list)")
	jsonFile := fs.String("json", "", "also write the results as JSON to `file`")
	inproc := fs.Bool("inproc", false, "run servers in this process instead of a separate one")
	smoke := fs.Bool("smoke", false, "run every system through one tiny cell (100 calls of 16 B) and exit non-zero on any failure")
	list := fs.Bool("list", false, "list the systems and cells and exit")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process (servers too, with -inproc) to `file`")
	rrqm := fs.Int("rrqm", 0, "instead of the cells, run the seed reports' RRQM test: `N` sequential checked Sum calls per system (all but drpc and the floors), -runs times")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: bench [flags]\n\nCompares rpcd with peer RPC frameworks and floors; see README.md.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *list {
		fmt.Fprintf(stdout, "systems: %s\ncells:   %s\n", strings.Join(systemNames(), ", "), strings.Join(cellNames(allCells), ", "))
		return 0
	}
	names, err := pickSystems(*systemsFlag)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if *smoke {
		if err := runSmoke(names, *inproc, stdout); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		return 0
	}
	if *rrqm > 0 {
		if err := runSum(names, *rrqm, max(*runs, 1), *inproc, stdout); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		return 0
	}
	cells, err := pickCells(*cellsFlag)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if *runs < 1 || *d <= 0 || *warmup < 0 {
		fmt.Fprintln(stderr, "bench: -runs must be at least 1, -d positive, -warmup not negative")
		return 2
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(stderr, "bench: -cpuprofile: %v\n", err)
			return 1
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}

	where := "separate process"
	if *inproc {
		where = "in-process"
	}
	rep := &report{
		Machine: describeMachine(),
		Settings: settings{
			Duration: d.String(), Warmup: warmup.String(), Runs: *runs, Server: where,
			Cells: cellNames(cells), Systems: names,
			Command: "bench " + strings.Join(args, " "),
			Started: time.Now().UTC().Format(time.RFC3339),
		},
	}
	start := time.Now()
	rep.printHeader(stdout)
	failed := rep.run(cells, names, *d, *warmup, *runs, *inproc, stdout, stderr)
	rep.ElapsedSec = time.Since(start).Seconds()
	rep.Notes = notes(rep.Machine, *inproc)
	rep.printNotes(stdout)
	if *jsonFile != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err == nil {
			err = os.WriteFile(*jsonFile, append(b, '\n'), 0o644)
		}
		if err != nil {
			fmt.Fprintf(stderr, "bench: writing %s: %v\n", *jsonFile, err)
			return 1
		}
		fmt.Fprintf(stdout, "\nwrote %s\n", *jsonFile)
	}
	if failed {
		fmt.Fprintln(stderr, "bench: some runs failed or had errors; see the tables")
		return 1
	}
	return 0
}

func cellNames(cells []cell) []string {
	var names []string
	for _, c := range cells {
		names = append(names, c.Name)
	}
	return names
}

// splitList splits a comma-separated flag value; "all" or "" means all.
func splitList(v string) []string {
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	if len(out) == 1 && out[0] == "all" {
		return nil
	}
	return out
}

func pickSystems(v string) ([]string, error) {
	want := splitList(v)
	if want == nil {
		return systemNames(), nil
	}
	for _, n := range want {
		if _, ok := systems[n]; !ok {
			return nil, fmt.Errorf("%w %q (have %s)", errNoSystem, n, strings.Join(systemNames(), ", "))
		}
	}
	// Table order, whatever the flag's order.
	var names []string
	for _, n := range systemNames() {
		if slices.Contains(want, n) {
			names = append(names, n)
		}
	}
	return names, nil
}

func pickCells(v string) ([]cell, error) {
	want := splitList(v)
	if want == nil {
		return allCells, nil
	}
	var cells []cell
	for _, n := range want {
		i := slices.IndexFunc(allCells, func(c cell) bool { return strings.EqualFold(c.Name, n) })
		if i < 0 {
			return nil, fmt.Errorf("bench: no such cell %q (have %s)", n, strings.Join(cellNames(allCells), ", "))
		}
		cells = append(cells, allCells[i])
	}
	return cells, nil
}

// order returns the systems in the order run r measures them: run r starts
// with system r (mod n) and goes forward on even runs, backward on odd ones,
// so that no system always runs first, last, or right after the same
// neighbour.
func order(names []string, r int) []string {
	n := len(names)
	out := make([]string, n)
	for i := range names {
		j := r + i
		if r%2 == 1 {
			j = r - i
		}
		out[i] = names[((j%n)+n)%n]
	}
	return out
}

// runSmoke runs every named system through 100 calls of 16 bytes on one
// connection and returns an error naming each one that failed.
func runSmoke(names []string, inproc bool, w io.Writer) error {
	var errs []error
	for _, name := range names {
		r, err := smokeOne(systems[name], inproc)
		if err != nil {
			fmt.Fprintf(w, "smoke %-10s FAIL  %v\n", name, err)
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		fmt.Fprintf(w, "smoke %-10s ok    %d calls, p50 %.1f µs\n", name, r.Calls, r.P50US)
	}
	if len(errs) > 0 {
		return fmt.Errorf("bench: smoke failed: %w", errors.Join(errs...))
	}
	return nil
}

// smokeCalls is how many calls -smoke makes per system.
const smokeCalls = 100

// smokeOne serves sys and makes smokeCalls checked calls to it.
func smokeOne(sys system, inproc bool) (runResult, error) {
	srv, err := startServer(sys, inproc)
	if err != nil {
		return runResult{}, err
	}
	defer srv.stop()
	r := measure(sys, srv, smokeCell, 0, 0, smokeCalls)
	switch {
	case r.failErr != nil:
		return r, r.failErr
	case r.Failed != "":
		return r, errors.New(r.Failed)
	case r.Errors > 0:
		return r, fmt.Errorf("%d of %d calls failed: %v", r.Errors, r.Calls, r.ErrorsBy)
	case r.Calls != smokeCalls:
		return r, fmt.Errorf("%d calls made, want %d", r.Calls, smokeCalls)
	}
	return r, nil
}
