package load

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// Matrix is a table of call loads against one server: each of Scenarios at
// each number of Callers, each caller on a connection of its own, and each
// of Throughput on ThroughputConns connections.
type Matrix struct {
	Name            string   // as the table's first line gives it
	Scenarios       []string // named scenarios (LookupScenario), a row each
	Callers         []int    // a column each
	Throughput      []string // named scenarios, a row each in a column of their own
	ThroughputConns int
}

// SeedMatrix returns the seed table (rpcd bench -matrix seed): the six
// scenarios rpcd's benchmarks began from (docs/performance.md, "Where the
// names come from") at 1, 4, 16, 20 and 32 callers,
// and NoArg and EchoPacket16 over 100 connections for throughput.
func SeedMatrix() Matrix {
	return Matrix{
		Name:            "seed",
		Scenarios:       []string{"NoArg", "EchoString16", "EchoString2000", "MultiArgs", "EchoPacket16", "EchoPacket2000"},
		Callers:         []int{1, 4, 16, 20, 32},
		Throughput:      []string{"NoArg", "EchoPacket16"},
		ThroughputConns: 100,
	}
}

// Configs returns the loads of the matrix, row by row: each base with the
// scenario of its row, its column's connections and one caller on each.
func (m Matrix) Configs(base Config) ([]Config, error) {
	var cfgs []Config
	add := func(name string, conns int) error {
		sc, ok := LookupScenario(name)
		if !ok {
			return fmt.Errorf("rpcd: load: matrix %s: no scenario %q", m.Name, name)
		}
		cfg := base
		cfg.Scenario, cfg.Conns, cfg.Inflight = sc, conns, 1
		cfgs = append(cfgs, cfg)
		return nil
	}
	for _, name := range m.Scenarios {
		for _, n := range m.Callers {
			if err := add(name, n); err != nil {
				return nil, err
			}
		}
	}
	for _, name := range m.Throughput {
		if err := add(name, m.ThroughputConns); err != nil {
			return nil, err
		}
	}
	return cfgs, nil
}

// throughputSuffix follows the name of a Throughput row.
const throughputSuffix = " throughput"

// WriteText writes the reports of the matrix's loads as one table: a row
// per scenario, a column per number of callers, each cell calls/s and p99
// latency; then the errors of all by kind. A load without a report (an
// interrupted run) shows "-". runs is as for Report.WriteText.
func (m Matrix) WriteText(w io.Writer, reports []*Report, runs int) error {
	var b bytes.Buffer
	if len(reports) == 0 {
		return nil
	}
	s := reports[0].Settings
	fmt.Fprintf(&b, "matrix %s: calls/s (p99 µs) by callers, each caller on its own connection; %s\n", m.Name, loadText(s, runs))
	type key struct {
		scenario string
		conns    int
	}
	cells := map[key]*Report{}
	for _, r := range reports {
		cells[key{r.Settings.Scenario, r.Settings.Connections}] = r
	}
	columns := append(append([]int(nil), m.Callers...), m.ThroughputConns)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "scenario")
	for _, n := range columns {
		fmt.Fprintf(tw, "\t%d", n)
	}
	fmt.Fprint(tw, "\terrors\n")
	row := func(label, scenario string, conns []int) {
		fmt.Fprint(tw, label)
		var errs int64
		for _, n := range columns {
			r, ok := cells[key{scenario, n}]
			switch {
			case !slices.Contains(conns, n):
				fmt.Fprint(tw, "\t")
			case !ok:
				fmt.Fprint(tw, "\t-")
			case r.Calls == r.Errors: // none timed
				fmt.Fprintf(tw, "\t%.0f (-)", r.CallsPerSec)
				errs += r.Errors
			default:
				fmt.Fprintf(tw, "\t%.0f (%.0f)", r.CallsPerSec, r.P99US)
				errs += r.Errors
			}
		}
		fmt.Fprintf(tw, "\t%d\n", errs)
	}
	for _, name := range m.Scenarios {
		row(name, name, m.Callers)
	}
	for _, name := range m.Throughput {
		row(name+throughputSuffix, name, []int{m.ThroughputConns})
	}
	tw.Flush()

	by := map[string]int64{}
	first := map[string]string{}
	for _, r := range reports {
		for k, v := range r.ErrorsBy {
			by[k] += v
		}
		for k, v := range r.FirstErrors {
			if _, ok := first[k]; !ok {
				first[k] = v
			}
		}
	}
	writeErrors(&b, by, first)
	_, err := w.Write(b.Bytes())
	return err
}
