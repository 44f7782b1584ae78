package load

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/rpcd/rpcd/handler/builtin"
)

// The golden files hold what rpcd bench, soak and chaos printed of these
// reports, text and JSON, when the reports lived in cmd/rpcd: the writers
// and the JSON field names must not change without the files changing
// with them.

// goldenReports are bench reports of every row and column of the seed
// matrix, some with errors, one with every call failed.
func goldenReports() []*Report {
	var rs []*Report
	yes := false
	seed := SeedMatrix()
	for i, sc := range append(append([]string{}, seed.Scenarios...), seed.Throughput...) {
		for j, n := range seed.Callers {
			if i >= len(seed.Scenarios) {
				if j > 0 {
					break
				}
				n = seed.ThroughputConns
			}
			r := &Report{Calls: int64(1000*i + j + 1), Errors: int64(j % 2), ErrorsBy: map[string]int64{}, CallsPerSec: 12345.678 + float64(i*j), P99US: 99.5 + float64(i),
				MeanUS: 1.25, P50US: 2, P90US: 3, P999US: 4, MaxUS: 5, BytesPerSec: 2e6, CPUPerCallUS: 1.234, Runs: 3,
				Settings: Settings{Scenario: sc, Route: "Bench/X", Codec: "raw", PayloadBytes: 16, Connections: n, Inflight: 1, Warmup: "500ms", Timeout: "5s", GOMAXPROCS: 2, Duration: "2s"}}
			if j%2 == 0 {
				r.ServerCPUPerCallUS = 0.987
			}
			if j%2 == 1 {
				r.ErrorsBy["unavailable"] = 1
				r.FirstErrors = map[string]string{"unavailable": "rpcd: unavailable: x"}
			}
			if i == 2 && j == 2 {
				r.Calls, r.Errors = 5, 5
				r.ErrorsBy["wrong reply"] = 4
				r.RateReached = &yes
			}
			rs = append(rs, r)
		}
	}
	return rs
}

func checkGolden(t *testing.T, file string, got []byte) {
	t.Helper()
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s:\n%s", file, got)
	}
}

func TestWriteTextBench(t *testing.T) {
	var out bytes.Buffer
	rs := goldenReports()
	seed := SeedMatrix()
	_ = seed.WriteText(&out, rs, 3)
	_ = seed.WriteText(&out, rs[:7], 3)
	_ = seed.WriteText(&out, rs[4:9], 1)
	for _, i := range []int{0, 1, 3} {
		rs[i].Settings.N, rs[i].Settings.Duration, rs[i].Settings.Warmup = 200, "", "1s"
	}
	rs[3].Settings.Rate = 5000
	_ = rs[3].WriteText(&out, 1)
	_ = rs[12].WriteText(&out, 3)
	rs[0].Settings.Scenario = "custom"
	_ = rs[0].WriteText(&out, 1)
	rs[1].Settings.Scenario = "Sum"
	_ = rs[1].WriteText(&out, 1)
	b, _ := json.MarshalIndent(rs[:2], "", "  ")
	out.Write(append(b, '\n'))
	checkGolden(t, "testdata/bench.golden", out.Bytes())
}

func TestWriteTextSoakChaos(t *testing.T) {
	var out bytes.Buffer
	writeJSON := func(v any) {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		out.Write(append(b, '\n'))
	}
	w := func(warm bool, end float64) SoakWindow {
		return SoakWindow{EndSec: end, Warmup: warm, Calls: 100, Errors: 1, ErrorsBy: map[string]int64{"unavailable": 1}, CallsPerSec: 999.4, P50US: 10, P99US: 99, MaxUS: 1234,
			FirstErrors: map[string]string{"unavailable": "rpcd: unavailable: boom"},
			Server:      builtin.StatsReply{HeapInuse: 5 << 20, RSS: 20 << 20, Goroutines: 136, Conns: 1001, CPUSec: end}, Client: SoakProcess{Goroutines: 5, HeapInuse: 3 << 20, RSS: 9 << 20, CPUPerCallUS: 7.5, ServerCPUPerCallUS: 6.25}}
	}
	rep := &SoakReport{Scenario: "EchoPacket16", Conns: 1000, RatePerConn: 40, Pipeline: 4, Compression: "zstd", Server: "child process pid 1 at 127.0.0.1:1",
		Idle: builtin.StatsReply{HeapInuse: 3 << 20, RSS: 17 << 20, Goroutines: 10, Conns: 1}, Connected: builtin.StatsReply{HeapInuse: 4 << 20, RSS: 18 << 20, Goroutines: 11, Conns: 1001},
		Windows: []SoakWindow{w(true, 10), w(false, 20), w(false, 30)}, Calls: 300, Errors: 3, GOMAXPROCS: 2, DialSec: 1.5,
		ClientHeapPerConn: 2048, ClientRSSPerConn: 4096}
	judgeSoak(rep, 40000)
	_ = rep.WriteText(&out)
	for _, w := range rep.Windows {
		out.WriteString(w.String() + "\n")
	}
	writeJSON(rep)
	rep2 := &SoakReport{Scenario: "NoArg", Conns: 1}
	judgeSoak(rep2, 1)
	_ = rep2.WriteText(&out)
	writeJSON(rep2)

	ch := &ChaosReport{Duration: "3s", Errors: map[string]int{}, Stops: map[string]int{"killed": 3, "terminated": 2}, Restarts: 5}
	ok := chaosOutcome{}
	judgeChaos(ch, [][]chaosOutcome{{ok, {code: 14, unprocessed: true}, {code: 14}}, {ok, {code: 4, late: true}}}, map[[2]int]int{{0, 0}: 2, {1, 0}: 1, {0, 2}: 1})
	ch.LedgerLines = 4
	_ = ch.WriteText(&out)
	writeJSON(ch)
	writeJSON(&ChaosReport{Errors: map[string]int{}, Stops: map[string]int{}})
	checkGolden(t, "testdata/soakchaos.golden", out.Bytes())
}
