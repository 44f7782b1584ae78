package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/load"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/record"
)

// The bench tests check what is measured and reported, never how fast:
// calls, errors and their kinds, the fields of the output, the child
// server's life. Runs are bounded by -n, or by tiny -d per matrix cell.

// benchFields are the fields every -json result carries.
var benchFields = []string{"calls_per_sec", "p50_us", "p90_us", "p99_us", "p999_us", "max_us", "errors", "calls",
	"mean_us", "bytes_per_sec", "errors_by", "cpu_per_call_us", "settings"}

// benchSettingsFields are the fields of every result's settings.
var benchSettingsFields = []string{"scenario", "route", "addr", "connections", "inflight", "warmup", "rate", "gomaxprocs", "server"}

// childPID matches bench's first line when it starts its own server.
var childPID = regexp.MustCompile(`(?m)^server: child process pid (\d+) at (\S+)$`)

// checkChildGone fails t if the process pid still runs, and kills it.
func checkChildGone(t *testing.T, pid int) {
	t.Helper()
	gone, err := processGone(pid)
	if gone {
		return
	}
	t.Errorf("the server child process %d still runs after bench exited (%v)", pid, err)
	killProcess(pid)
}

// columns splits a table line into its cells: tabwriter pads with two
// spaces or more, and no cell holds two spaces in a row.
var columns = regexp.MustCompile(`\s{2,}`)

// benchRow returns the row of bench's table named name, by column.
func benchRow(t *testing.T, out, name string) map[string]string {
	t.Helper()
	var header []string
	for _, line := range strings.Split(out, "\n") {
		cells := columns.Split(strings.TrimSpace(line), -1)
		switch {
		case cells[0] == "scenario":
			header = cells
		case header != nil && cells[0] == name:
			if len(cells) != len(header) {
				t.Fatalf("row %q has %d cells, header %d:\n%s", name, len(cells), len(header), out)
			}
			row := map[string]string{}
			for i, h := range header {
				row[h] = cells[i]
			}
			return row
		}
	}
	t.Fatalf("no table row %q in:\n%s", name, out)
	return nil
}

// decodeBench decodes one -json result and checks it has every field.
func decodeBench(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var r map[string]any
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("-json output is not one JSON object: %v\n%s", err, data)
	}
	checkBenchFields(t, r)
	return r
}

func checkBenchFields(t *testing.T, r map[string]any) {
	t.Helper()
	for _, k := range benchFields {
		if _, ok := r[k]; !ok {
			t.Errorf("result lacks %q: %v", k, r)
		}
	}
	s, _ := r["settings"].(map[string]any)
	for _, k := range benchSettingsFields {
		if _, ok := s[k]; !ok {
			t.Errorf("settings lack %q: %v", k, s)
		}
	}
	_, hasD := s["duration"]
	_, hasN := s["n"]
	if hasD == hasN {
		t.Errorf("settings have duration %v and n %v; want exactly one", s["duration"], s["n"])
	}
}

// TestProcessBenchChild runs bench with no -addr: it starts its own
// server, loads it, prints the table and stops the server.
func TestProcessBenchChild(t *testing.T) {
	r := rpcd(t, "", "bench", "-n", "200", "-scenario", "EchoPacket16")
	if r.code != 0 {
		t.Fatalf("exit status %d, want 0; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if r.stderr != "" {
		t.Errorf("stderr %q, want none (not a terminal: no progress line)", r.stderr)
	}
	m := childPID.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("stdout does not name the child server:\n%s", r.stdout)
	}
	pid, _ := strconv.Atoi(m[1])
	checkChildGone(t, pid)

	row := benchRow(t, r.stdout, "EchoPacket16")
	if row["calls"] != "200" || row["errors"] != "0" || row["conns×inflight"] != "1×1" {
		t.Errorf("calls %s, errors %s, conns×inflight %s; want 200, 0, 1×1:\n%s", row["calls"], row["errors"], row["conns×inflight"], r.stdout)
	}
	for _, col := range []string{"calls/s", "mean µs", "p50 µs", "p90 µs", "p99 µs", "p99.9 µs", "max µs", "MB/s", "CPU µs/call"} {
		if v, err := strconv.ParseFloat(row[col], 64); err != nil || v <= 0 {
			t.Errorf("%s is %q, want a number above 0", col, row[col])
		}
	}
	if !strings.Contains(r.stdout, "GOMAXPROCS") {
		t.Errorf("output does not note GOMAXPROCS:\n%s", r.stdout)
	}
}

// TestProcessBenchChildJSON checks -json with a child server.
func TestProcessBenchChildJSON(t *testing.T) {
	r := rpcd(t, "", "bench", "-json", "-n", "200", "-warmup", "0", "-scenario", "EchoPacket16")
	if r.code != 0 {
		t.Fatalf("exit status %d, want 0; stderr:\n%s", r.code, r.stderr)
	}
	res := decodeBench(t, []byte(r.stdout))
	if res["calls"] != 200.0 || res["errors"] != 0.0 {
		t.Errorf("calls %v, errors %v; want 200 and 0", res["calls"], res["errors"])
	}
	if by, ok := res["errors_by"].(map[string]any); !ok || len(by) != 0 {
		t.Errorf("errors_by %v, want {}", res["errors_by"])
	}
	s := res["settings"].(map[string]any)
	want := map[string]any{"scenario": "EchoPacket16", "route": builtin.EchoPacket, "codec": "raw", "payload_bytes": 16.0,
		"server": "child", "connections": 1.0, "inflight": 1.0, "n": 200.0, "warmup": "0s", "rate": 0.0}
	for k, v := range want {
		if s[k] != v {
			t.Errorf("settings.%s is %v, want %v", k, s[k], v)
		}
	}
	pid, ok := s["child_pid"].(float64)
	if !ok || pid <= 0 {
		t.Fatalf("settings.child_pid is %v", s["child_pid"])
	}
	checkChildGone(t, int(pid))
	if r.stderr != "" {
		t.Errorf("stderr %q, want none", r.stderr)
	}
}

// TestProcessBenchRuns: -runs N makes each cell N times and reports one of
// them, the median, with the errors of all.
func TestProcessBenchRuns(t *testing.T) {
	r := rpcd(t, "", "bench", "-json", "-n", "100", "-warmup", "0", "-runs", "3", "-scenario", "NoArg")
	if r.code != 0 {
		t.Fatalf("exit status %d, want 0; stderr:\n%s", r.code, r.stderr)
	}
	res := decodeBench(t, []byte(r.stdout))
	if res["runs"] != 3.0 || res["calls"] != 100.0 || res["errors"] != 0.0 {
		t.Errorf("runs %v, calls %v, errors %v; want 3, 100 (one run's) and 0", res["runs"], res["calls"], res["errors"])
	}
}

// TestProcessBenchScenarios loads one `rpcd serve` process with every
// scenario and with routes of the user's choice.
func TestProcessBenchScenarios(t *testing.T) {
	d := startServe(t)
	payload := filepath.Join(t.TempDir(), "sum.json")
	if err := os.WriteFile(payload, []byte(`{"a": 40, "b": 2}`), 0o600); err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(t.TempDir(), "text")
	if err := os.WriteFile(text, []byte(strings.Repeat("compressible text, ", 2000)[:20000]), 0o600); err != nil {
		t.Fatal(err)
	}
	packet := filepath.Join(t.TempDir(), "packet")
	if err := os.WriteFile(packet, []byte("raw\x00bytes\xff\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name      string
		args      []string
		wantCalls float64
		want      map[string]any // settings
	}{}
	for _, sc := range load.ScenarioNames() {
		tests = append(tests, struct {
			name      string
			args      []string
			wantCalls float64
			want      map[string]any
		}{sc, []string{"-scenario", sc}, 50, map[string]any{"scenario": sc}})
	}
	more := []struct {
		name      string
		args      []string
		wantCalls float64
		want      map[string]any
	}{
		{"custom raw echo", []string{"-route", builtin.EchoPacket, "-size", "100", "-expect-echo"}, 50,
			map[string]any{"scenario": "custom", "route": builtin.EchoPacket, "codec": "raw", "payload_bytes": 100.0}},
		{"custom raw file", []string{"-route", builtin.EchoPacket, "-payload", packet, "-expect-echo"}, 50,
			map[string]any{"scenario": "custom", "payload_bytes": 11.0}},
		{"custom json string", []string{"-route", builtin.EchoString, "-json-codec", "-size", "40", "-expect-echo"}, 50,
			map[string]any{"scenario": "custom", "route": builtin.EchoString, "codec": "json", "payload_bytes": 40.0}},
		{"custom json file", []string{"-route", builtin.Sum, "-json-codec", "-payload", payload}, 50,
			map[string]any{"route": builtin.Sum, "codec": "json"}},
		{"custom no payload", []string{"-route", builtin.Ping}, 50,
			map[string]any{"payload_bytes": 0.0}},
		{"compressed", []string{"-route", builtin.EchoPacket, "-payload", text, "-expect-echo", "-compress", "zstd"}, 50,
			map[string]any{"compress": "zstd", "payload_bytes": 20000.0}},
		{"connections and inflight", []string{"-scenario", "Sum", "-c", "3", "-inflight", "4", "-n", "120"}, 120,
			map[string]any{"connections": 3.0, "inflight": 4.0, "callers": 12.0}},
		{"open loop", []string{"-scenario", "NoArg", "-rate", "2000"}, 50,
			map[string]any{"rate": 2000.0}},
	}
	tests = append(tests, more...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"bench", "-addr", d.addr, "-json", "-n", "50", "-warmup", "0"}, tt.args...)
			r := rpcd(t, "", args...)
			if r.code != 0 {
				t.Fatalf("exit status %d, want 0; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			res := decodeBench(t, []byte(r.stdout))
			if res["calls"] != tt.wantCalls || res["errors"] != 0.0 {
				t.Errorf("calls %v, errors %v (%v); want %v and 0", res["calls"], res["errors"], res["errors_by"], tt.wantCalls)
			}
			s := res["settings"].(map[string]any)
			if s["server"] != "external" || s["addr"] != d.addr {
				t.Errorf("settings say server %v at %v, want external at %s", s["server"], s["addr"], d.addr)
			}
			for k, v := range tt.want {
				if s[k] != v {
					t.Errorf("settings.%s is %v, want %v", k, s[k], v)
				}
			}
		})
	}

	t.Run("table", func(t *testing.T) {
		r := rpcd(t, "", "bench", "-addr", d.addr, "-n", "50", "-warmup", "0", "-scenario", "MultiArgs", "-c", "2", "-inflight", "3")
		if r.code != 0 {
			t.Fatalf("exit status %d, want 0; stderr:\n%s", r.code, r.stderr)
		}
		if !strings.HasPrefix(r.stdout, "server: "+d.addr+"\n") {
			t.Errorf("output does not begin by naming the server %s:\n%s", d.addr, r.stdout)
		}
		row := benchRow(t, r.stdout, "MultiArgs")
		if row["calls"] != "50" || row["errors"] != "0" || row["conns×inflight"] != "2×3" {
			t.Errorf("calls %s, errors %s, conns×inflight %s; want 50, 0, 2×3:\n%s", row["calls"], row["errors"], row["conns×inflight"], r.stdout)
		}
	})

	t.Run("matrix json", func(t *testing.T) {
		r := rpcd(t, "", "bench", "-addr", d.addr, "-matrix", "seed", "-n", "20", "-warmup", "0", "-json")
		if r.code != 0 {
			t.Fatalf("exit status %d, want 0; stderr:\n%s", r.code, r.stderr)
		}
		var cells []map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &cells); err != nil {
			t.Fatalf("-matrix -json is not an array of objects: %v\n%s", err, r.stdout)
		}
		var got []string
		for _, c := range cells {
			checkBenchFields(t, c)
			s := c["settings"].(map[string]any)
			got = append(got, s["scenario"].(string)+"×"+strconv.Itoa(int(s["connections"].(float64))))
			if c["calls"] != 20.0 || c["errors"] != 0.0 || s["inflight"] != 1.0 {
				t.Errorf("cell %v: calls %v, errors %v, inflight %v; want 20, 0, 1", got[len(got)-1], c["calls"], c["errors"], s["inflight"])
			}
		}
		var want []string
		for _, sc := range load.SeedMatrix().Scenarios {
			for _, n := range []int{1, 4, 16, 20, 32} {
				want = append(want, sc+"×"+strconv.Itoa(n))
			}
		}
		want = append(want, "NoArg×100", "EchoPacket16×100")
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("cells\n%v\nwant\n%v", got, want)
		}
	})
}

// TestProcessBenchMatrix runs -matrix seed with tiny cells against a child
// server and checks every row of the table.
func TestProcessBenchMatrix(t *testing.T) {
	r := rpcd(t, "", "bench", "-matrix", "seed", "-d", "50ms", "-warmup", "0")
	if r.code != 0 {
		t.Fatalf("exit status %d, want 0; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	m := childPID.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("stdout does not name the child server:\n%s", r.stdout)
	}
	pid, _ := strconv.Atoi(m[1])
	checkChildGone(t, pid)

	if !regexp.MustCompile(`(?m)^scenario\s+1\s+4\s+16\s+20\s+32\s+100\s+errors$`).MatchString(r.stdout) {
		t.Errorf("no header with the caller counts:\n%s", r.stdout)
	}
	cell := regexp.MustCompile(`\d+ \(\d+\)`)
	rows := map[string]int{}
	for _, sc := range load.SeedMatrix().Scenarios {
		rows[sc] = 5
	}
	rows["NoArg throughput"] = 1
	rows["EchoPacket16 throughput"] = 1
	for name, n := range rows {
		line := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s{2,}(.*)$`).FindStringSubmatch(r.stdout)
		if line == nil {
			t.Errorf("no row %q:\n%s", name, r.stdout)
			continue
		}
		if got := len(cell.FindAllString(line[1], -1)); got != n {
			t.Errorf("row %q has %d cells, want %d: %q", name, got, n, line[0])
		}
		if !strings.HasSuffix(line[1], "  0") {
			t.Errorf("row %q does not end with 0 errors: %q", name, line[0])
		}
	}
}

// liar wraps the routes that bench checks so that every second reply of
// each is wrong, yet well-formed: a raw echo has its first byte changed, a
// JSON string a letter, a JSON number a digit more. Test/Remote counts the
// distinct connections that call it; Test/Liar always answers wrongly.
type liar struct {
	mu      sync.Mutex
	calls   map[string]*atomic.Int64
	remotes map[string]bool
}

func newLiar() *liar { return &liar{calls: map[string]*atomic.Int64{}, remotes: map[string]bool{}} }

func (l *liar) register(reg *handler.Registry) {
	reg.HandleFunc("Test/Liar", func(_ context.Context, req, reply []byte) ([]byte, error) {
		return append(append(reply, req...), '!'), nil
	})
	reg.HandleFunc("Test/Remote", func(ctx context.Context, _, reply []byte) ([]byte, error) {
		l.mu.Lock()
		l.remotes[handler.CallFrom(ctx).Remote.String()] = true
		l.mu.Unlock()
		return reply, nil
	})
	reg.Use(func(next handler.Handler) handler.Handler {
		return handler.HandlerFunc(func(ctx context.Context, req, reply []byte) ([]byte, error) {
			out, err := next.ServeRPC(ctx, req, reply)
			route := handler.CallFrom(ctx).Route
			if err != nil || !(strings.HasPrefix(route, "Bench/") || route == builtin.Sum) {
				return out, err
			}
			if l.count(route)%2 == 0 {
				return out, nil
			}
			switch n := len(out) - len(reply); {
			case route == builtin.EchoPacket && n > 0:
				out[len(reply)] ^= 0xff
			case n >= 3 && out[len(out)-1] == '"':
				out[len(out)-2] ^= 1
			default:
				out = append(out, '1')
			}
			return out, nil
		})
	})
}

// count counts a call of route and returns how many there were before.
func (l *liar) count(route string) int64 {
	l.mu.Lock()
	c, ok := l.calls[route]
	if !ok {
		c = new(atomic.Int64)
		l.calls[route] = c
	}
	l.mu.Unlock()
	return c.Add(1) - 1
}

// serveLiar runs serve in this process with the liar's routes and
// middleware, and returns its address. The test's cleanup stops it.
func serveLiar(t *testing.T, l *liar) string {
	t.Helper()
	sigs := make(chan os.Signal, 1)
	log := &syncBuffer{}
	c := &cli{
		stdin:    strings.NewReader(""),
		stdout:   &bytes.Buffer{},
		stderr:   log,
		signals:  func() (<-chan os.Signal, func()) { return sigs, func() {} },
		register: l.register,
	}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		c.run([]string{"serve", "-addr", "127.0.0.1:0", "-log-format", "json", "-loops", "1"})
	}()
	t.Cleanup(func() {
		sigs <- syscall.SIGTERM
		select {
		case <-exited:
		case <-time.After(stopTimeout):
			t.Errorf("in-process serve did not stop within %v of SIGTERM", stopTimeout)
		}
	})
	addr, err := waitServing(log, exited)
	if err != nil {
		t.Fatalf("serve: %v; log:\n%s", err, log.String())
	}
	return addr
}

// TestBenchWrongReply checks that every scenario checks its replies: a
// server that answers every second call wrongly has half the calls counted
// as wrong replies, in the JSON and in the table.
func TestBenchWrongReply(t *testing.T) {
	l := newLiar()
	addr := serveLiar(t, l)

	for _, sc := range load.ScenarioNames() {
		t.Run(sc, func(t *testing.T) {
			out, errOut, code := callInProcess("bench", "-addr", addr, "-json", "-n", "50", "-warmup", "0", "-scenario", sc)
			if code != 0 {
				t.Fatalf("exit status %d, want 0 (only half failed); stderr:\n%s", code, errOut)
			}
			res := decodeBench(t, []byte(out))
			by, _ := res["errors_by"].(map[string]any)
			if res["calls"] != 50.0 || res["errors"] != 25.0 || by["wrong reply"] != 25.0 || len(by) != 1 {
				t.Errorf("calls %v, errors %v by %v; want 50 calls and 25 wrong replies", res["calls"], res["errors"], by)
			}
			first, _ := res["first_errors"].(map[string]any)
			if msg, _ := first["wrong reply"].(string); !strings.HasPrefix(msg, "rpcd: wrong reply: ") {
				t.Errorf("first wrong reply %q, want a message beginning rpcd: wrong reply:", msg)
			}
		})
	}

	t.Run("custom with -expect-echo", func(t *testing.T) {
		out, errOut, code := callInProcess("bench", "-addr", addr, "-n", "50", "-warmup", "0", "-route", builtin.EchoPacket, "-size", "100", "-expect-echo")
		if code != 0 {
			t.Fatalf("exit status %d, want 0; stderr:\n%s", code, errOut)
		}
		row := benchRow(t, out, builtin.EchoPacket)
		if row["calls"] != "50" || row["errors"] != "25" {
			t.Errorf("calls %s, errors %s; want 50 and 25:\n%s", row["calls"], row["errors"], out)
		}
		for _, want := range []string{"errors: 25 wrong reply\n", "first wrong reply: rpcd: wrong reply: Bench/EchoPacket returned 100 bytes that differ from those sent at byte 0"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("custom without -expect-echo", func(t *testing.T) {
		out, errOut, code := callInProcess("bench", "-addr", addr, "-json", "-n", "50", "-warmup", "0", "-route", builtin.EchoPacket, "-size", "100")
		if code != 0 {
			t.Fatalf("exit status %d, want 0; stderr:\n%s", code, errOut)
		}
		if res := decodeBench(t, []byte(out)); res["calls"] != 50.0 || res["errors"] != 0.0 {
			t.Errorf("calls %v, errors %v; want 50 and none: replies are not checked", res["calls"], res["errors"])
		}
	})

	t.Run("every reply wrong", func(t *testing.T) {
		out, errOut, code := callInProcess("bench", "-addr", addr, "-n", "20", "-warmup", "0", "-route", "Test/Liar", "-size", "8", "-expect-echo")
		if code != 1 {
			t.Errorf("exit status %d, want 1", code)
		}
		if !strings.Contains(errOut, "rpcd: every call failed, 20 of 20 (20 wrong reply)") {
			t.Errorf("stderr does not say every call failed:\n%s", errOut)
		}
		if row := benchRow(t, out, "Test/Liar"); row["errors"] != "20" || row["p99 µs"] != "-" {
			t.Errorf("errors %s, p99 %s; want 20 and -:\n%s", row["errors"], row["p99 µs"], out)
		}
	})

	t.Run("no route", func(t *testing.T) {
		_, errOut, code := callInProcess("bench", "-addr", addr, "-n", "10", "-warmup", "0", "-route", "No/Such")
		if code != 1 || !strings.Contains(errOut, "(10 not found)") || !strings.Contains(errOut, "first not found: rpcd: not found: no route No/Such") {
			t.Errorf("exit status %d, stderr:\n%s\nwant 1 and the errors by code", code, errOut)
		}
	})

	t.Run("connections", func(t *testing.T) {
		_, errOut, code := callInProcess("bench", "-addr", addr, "-n", "120", "-warmup", "0", "-route", "Test/Remote", "-c", "3", "-inflight", "4")
		if code != 0 {
			t.Fatalf("exit status %d, want 0; stderr:\n%s", code, errOut)
		}
		l.mu.Lock()
		n := len(l.remotes)
		l.mu.Unlock()
		if n != 3 {
			t.Errorf("the server saw %d connections, want -c 3", n)
		}
	})

	t.Run("duration", func(t *testing.T) {
		out, errOut, code := callInProcess("bench", "-addr", addr, "-json", "-d", "200ms", "-warmup", "50ms", "-route", builtin.Ping, "-c", "2", "-inflight", "8")
		if code != 0 {
			t.Fatalf("exit status %d, want 0; stderr:\n%s", code, errOut)
		}
		res := decodeBench(t, []byte(out))
		if calls, _ := res["calls"].(float64); calls < 1 || res["errors"] != 0.0 {
			t.Errorf("calls %v, errors %v (%v); want some and none: the end of the run is no error", res["calls"], res["errors"], res["errors_by"])
		}
		if s := res["settings"].(map[string]any); s["duration"] != "200ms" || s["warmup"] != "50ms" {
			t.Errorf("settings say duration %v, warmup %v; want 200ms and 50ms", s["duration"], s["warmup"])
		}
	})
}

// TestBenchUnreachable checks that a server that cannot be reached makes
// bench exit 1 with the dial error.
func TestBenchUnreachable(t *testing.T) {
	addr := closedAddr(t)
	_, errOut, code := callInProcess("bench", "-addr", addr, "-n", "10", "-timeout", "2s")
	if code != 1 || !strings.Contains(errOut, "rpcd: unavailable: dial tcp "+addr) {
		t.Errorf("exit status %d, stderr %q; want 1 and the dial error", code, errOut)
	}
}

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestBenchUsage checks, in process, the bench command lines that are
// refused before any server is started or dialled.
func TestBenchUsage(t *testing.T) {
	dir := t.TempDir()
	notJSON := filepath.Join(dir, "not.json")
	if err := os.WriteFile(notJSON, []byte("{a:1}"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"zero connections", []string{"-c", "0"}, exitUsage, "-c is 0, want 1 or more"},
		{"zero inflight", []string{"-inflight", "0"}, exitUsage, "-inflight is 0"},
		{"too many callers", []string{"-c", "2000", "-inflight", "2000"}, exitUsage, "callers"},
		{"unknown scenario", []string{"-scenario", "Nope"}, exitUsage, `-scenario is "Nope", want one of NoArg, EchoString16`},
		{"route and a scenario that is not a call", []string{"-route", "Bench/EchoPacket", "-scenario", "FanOut"}, exitUsage, "-route and -scenario both"},
		{"payload and size", []string{"-route", "Bench/EchoPacket", "-payload", notJSON, "-size", "3"}, exitUsage, "-payload and -size both"},
		{"route and scenario", []string{"-route", "Bench/EchoPacket", "-scenario", "NoArg"}, exitUsage, "-route and -scenario both"},
		{"size without route", []string{"-size", "3"}, exitUsage, "-size goes with -route"},
		{"expect-echo without route", []string{"-expect-echo"}, exitUsage, "-expect-echo goes with -route"},
		{"bad route", []string{"-route", "A B"}, exitUsage, "want printable ASCII"},
		{"negative size", []string{"-route", "A/B", "-size", "-1"}, exitUsage, "-size is -1"},
		{"json size too small", []string{"-route", "A/B", "-json-codec", "-size", "1"}, exitUsage, "want at least 2"},
		{"size past the frame", []string{"-route", "A/B", "-size", "100", "-max-frame", "64"}, exitUsage, "exceeds -max-frame 64"},
		{"payload not json", []string{"-route", "A/B", "-json-codec", "-payload", notJSON}, exitUsage, "is not valid JSON"},
		{"payload missing", []string{"-route", "A/B", "-payload", filepath.Join(dir, "none")}, 1, "rpcd: reading -payload: open "},
		{"negative n", []string{"-n", "-1"}, exitUsage, "-n is -1"},
		{"zero duration", []string{"-d", "0s"}, exitUsage, "-d is 0s"},
		{"negative warmup", []string{"-warmup", "-1s"}, exitUsage, "-warmup is -1s"},
		{"negative rate", []string{"-rate", "-5"}, exitUsage, "-rate is -5"},
		{"zero runs", []string{"-runs", "0"}, exitUsage, "-runs is 0, want 1 or more"},
		{"zero timeout", []string{"-timeout", "0s"}, exitUsage, "-timeout is 0s"},
		{"unknown matrix", []string{"-matrix", "all"}, exitUsage, `-matrix is "all", want seed`},
		{"matrix with -c", []string{"-matrix", "seed", "-c", "4"}, exitUsage, "drop -c"},
		{"matrix with scenario", []string{"-matrix", "seed", "-scenario", "NoArg"}, exitUsage, "drop -scenario"},
		{"argument", []string{"now"}, exitUsage, `unexpected argument "now"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"bench"}, tt.args...), strings.NewReader(""), &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit status %d, want %d; stderr:\n%s", code, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantStderr, stderr.String())
			}
			if tt.wantCode == 2 && !strings.Contains(stderr.String(), "usage: rpcd bench [flags]") {
				t.Errorf("stderr lacks the usage line:\n%s", stderr.String())
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout %q, want none", stdout.String())
			}
		})
	}
}

// TestBenchScenarioList: the names -scenario takes are the ten loads bench
// has, each of which it accepts (a later flag stops it before any server
// is started), and both its refusal of an unknown name and -h list them
// all. The error listed seven, the call scenarios alone.
func TestBenchScenarioList(t *testing.T) {
	want := []string{"NoArg", "EchoString16", "EchoString2000", "MultiArgs", "EchoPacket16", "EchoPacket2000", "Sum", "FanOut", "StreamUpload", "StreamDownload"}
	if got := benchScenarioNames(); !slices.Equal(got, want) {
		t.Errorf("benchScenarioNames() = %q, want %q", got, want)
	}
	bench := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"bench"}, args...), strings.NewReader(""), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	_, _, refusal := bench("-scenario", "Nope")
	if wantMsg := `-scenario is "Nope", want one of ` + strings.Join(want, ", ") + "\n"; !strings.Contains(refusal, wantMsg) {
		t.Errorf("refusal %q, want %q", refusal, wantMsg)
	}
	_, help, _ := bench("-h")
	for _, name := range benchScenarioNames() {
		// Each is taken: the run stops at -c 0 or -subs 0, not at -scenario.
		code, _, stderr := bench("-scenario", strings.ToLower(name), "-c", "0", "-subs", "0")
		if code != exitUsage || strings.Contains(stderr, "-scenario is") || !strings.Contains(stderr, " is 0, want 1 or more") {
			t.Errorf("-scenario %s: exit status %d, stderr %q; want it taken, and -c or -subs refused", name, code, stderr)
		}
		if !regexp.MustCompile(`(?m)^  ` + name + ` +\S`).MatchString(help) {
			t.Errorf("-h does not describe %s", name)
		}
		if !strings.Contains(help, " "+name+",") && !strings.Contains(help, " "+name+" (") {
			t.Errorf("-h's -scenario does not name %s", name)
		}
	}
}

// TestProcessBenchUsage checks the usage errors and help of the binary.
func TestProcessBenchUsage(t *testing.T) {
	for _, args := range [][]string{{"-c", "0"}, {"-scenario", "Nope"}, {"-route", "A/B", "-payload", "f", "-size", "1"}} {
		r := rpcd(t, "", append([]string{"bench"}, args...)...)
		if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, "usage: rpcd bench") {
			t.Errorf("bench %q: exit status %d, stdout %q, stderr %q; want 78 and the usage", args, r.code, r.stdout, r.stderr)
		}
	}
	r := rpcd(t, "", "bench", "-h")
	if r.code != 0 || !strings.Contains(r.stdout, "example:\n  rpcd bench -scenario EchoPacket16 -c 4 -inflight 32 -d 5s") {
		t.Errorf("bench -h: exit status %d, stdout:\n%s", r.code, r.stdout)
	}
	r = rpcd(t, "", "help")
	if !strings.Contains(r.stdout, "bench   load a server") {
		t.Errorf("help does not list bench:\n%s", r.stdout)
	}
}

// TestProcessBenchSignal checks that SIGINT or SIGTERM during a run stops
// it: bench prints what it measured, stops its child server and exits 1.
func TestProcessBenchSignal(t *testing.T) {
	needSignals(t)
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			var stdout, stderr syncBuffer
			cmd := exec.Command(rpcdBin, "bench", "-d", "1m", "-warmup", "0", "-scenario", "EchoPacket16")
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			var err error // Wait's, once exited is closed
			go func() {
				err = cmd.Wait()
				close(exited)
			}()
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-exited
			})
			if err := waitLog(&stdout, "server: child process pid"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond) // some calls
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
			case <-time.After(stopTimeout):
				t.Fatalf("bench did not exit within %v of %v", stopTimeout, sig)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Errorf("bench ended with %v, want exit status 1", err)
			}
			out := stdout.String()
			m := childPID.FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("stdout does not name the child server:\n%s", out)
			}
			pid, _ := strconv.Atoi(m[1])
			checkChildGone(t, pid)
			row := benchRow(t, out, "EchoPacket16")
			if calls, _ := strconv.Atoi(row["calls"]); calls < 1 || row["errors"] != "0" {
				t.Errorf("calls %s, errors %s; want some calls and no errors:\n%s", row["calls"], row["errors"], out)
			}
			if !strings.Contains(stderr.String(), "rpcd: bench interrupted") {
				t.Errorf("stderr does not say the run was interrupted:\n%s", stderr.String())
			}
		})
	}
}

// TestProcessBenchKilled: a bench killed outright (SIGKILL, no chance to
// stop its child) still takes its server child down with it.
func TestProcessBenchKilled(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the child's parent-death signal is Linux's")
	}
	var stdout syncBuffer
	cmd := exec.Command(rpcdBin, "bench", "-d", "1m", "-warmup", "0", "-scenario", "NoArg")
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if err := waitLog(&stdout, "server: child process pid"); err != nil {
		t.Fatal(err)
	}
	m := childPID.FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("stdout does not name the child server:\n%s", stdout.String())
	}
	pid, _ := strconv.Atoi(m[1])
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	deadline := time.Now().Add(stopTimeout)
	for gone, _ := processGone(pid); !gone; gone, _ = processGone(pid) {
		if time.Now().After(deadline) {
			killProcess(pid)
			t.Fatalf("the server child %d outlived its killed bench by %v", pid, stopTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBenchRateShortfall: an open-loop run that makes less than 95 % of
// -rate warns on standard error, and marks its JSON, saying what held it
// back; one that keeps up says rate_reached true and warns of nothing.
// Before, a single caller asked for 100,000 calls/s made 30,000 with a
// p50 of a second and said nothing.
func TestBenchRateShortfall(t *testing.T) {
	s := serveInProcess(t, nil)
	run := func(rate string, length ...string) (map[string]any, string) {
		out, errOut, code := callInProcess(append([]string{"bench", "-addr", s.addr, "-json", "-scenario", "EchoPacket16",
			"-rate", rate, "-warmup", "0"}, length...)...)
		if code != 0 {
			t.Fatalf("-rate %s: exit status %d; stderr:\n%s", rate, code, errOut)
		}
		return decodeBench(t, []byte(out)), errOut
	}

	res, errOut := run("10000000", "-d", "500ms") // no single caller makes ten million calls a second
	note, _ := res["rate_shortfall"].(string)
	if res["rate_reached"] != false || !strings.HasPrefix(note, "-rate 1e+07 not reached: ") {
		t.Errorf("rate_reached %v, rate_shortfall %q", res["rate_reached"], note)
	}
	callersNote := regexp.MustCompile(`1 caller \(-c 1 × -inflight 1\), each call taking \d+ µs, makes at most about \d+ calls/s: -rate 1e\+07 needs -c × -inflight of at least \d+, if the server keeps up`)
	if !callersNote.MatchString(note) {
		t.Errorf("rate_shortfall %q does not name the callers as the limit", note)
	}
	if errOut != "rpcd bench: "+note+"\n" {
		t.Errorf("stderr %q, want the warning %q", errOut, "rpcd bench: "+note)
	}

	// A number of calls, not a time: a run of -d ends at -d, so its last
	// calls' tail, long on a busy machine, would count against the rate.
	// 100 calls at 50/s take 2 s: a tail of 100 ms on a loaded machine
	// stays within the 5 % a run may fall short by.
	res, errOut = run("50", "-n", "100")
	if res["rate_reached"] != true || res["rate_shortfall"] != nil || errOut != "" {
		t.Errorf("at 50 calls/s: rate_reached %v, rate_shortfall %v, stderr %q; want true and no warning", res["rate_reached"], res["rate_shortfall"], errOut)
	}
}

// TestProcessBenchReplay replays a recording against a child server: its
// calls made, on as many connections as recorded, and with -compare the
// one answer that differs from the recorded one reported by its route.
func TestProcessBenchReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calls.rec")
	rec, err := record.Create(path, record.Options{Answers: true, Source: "server"})
	if err != nil {
		t.Fatal(err)
	}
	for conn := uint64(1); conn <= 2; conn++ {
		rec.TapOpen(conn, nil)
		for id := uint32(1); id <= 5; id++ {
			route, codec, req, reply := builtin.EchoPacket, proto.CodecRaw, fmt.Sprint("p", id), fmt.Sprint("p", id)
			if id == 5 {
				route, codec, req, reply = builtin.Sum, proto.CodecJSON, `{"a":1,"b":2}`, "3"
				if conn == 2 {
					reply = "4" // recorded wrong: the replay's 3 differs
				}
			}
			rec.TapFrame(conn, false, proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, Codec: codec, ID: id}, route, nil, []byte(req)))
			rec.TapFrame(conn, true, proto.AppendFrame(nil, proto.Header{Kind: proto.KindResponse, Codec: codec, ID: id}, "", nil, []byte(reply)))
		}
	}
	if _, err := rec.Stop(); err != nil {
		t.Fatal(err)
	}
	r := rpcd(t, "", "bench", "-json", "-replay", path, "-speed", "10", "-compare")
	if r.code != 0 {
		t.Fatalf("exit status %d, want 0; stderr:\n%s", r.code, r.stderr)
	}
	var out struct {
		Calls    int64         `json:"calls"`
		Errors   int64         `json:"errors"`
		Settings load.Settings `json:"settings"`
		Replay   struct {
			Sent    map[string]int64   `json:"sent"`
			Routes  map[string]int64   `json:"routes"`
			Speed   float64            `json:"speed"`
			Compare load.CompareReport `json:"compare"`
		} `json:"replay"`
	}
	decodeBench(t, []byte(r.stdout))
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	rr, c := out.Replay, out.Replay.Compare
	if out.Calls != 10 || out.Errors != 0 || out.Settings.Connections != 2 || out.Settings.Scenario != "replay" || rr.Speed != 10 ||
		rr.Sent["Request"] != 10 || rr.Routes[builtin.EchoPacket] != 8 || rr.Routes[builtin.Sum] != 2 {
		t.Errorf("%d calls, %d errors, settings %+v, replay %+v; want 10 calls over 2 connections, 8 echoes and 2 sums, at speed 10", out.Calls, out.Errors, out.Settings, rr)
	}
	if c.Compared != 10 || c.Mismatches != 1 || c.ByRoute[builtin.Sum] == nil || len(c.ByRoute) != 1 ||
		c.ByRoute[builtin.Sum].Examples[0].Want != "4" || c.ByRoute[builtin.Sum].Examples[0].Got != "3" {
		t.Errorf("compare %+v; want 10 compared, Math/Sum's one answer differing (want 4, got 3)", c)
	}
}
