package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/loadgen"
)

// TestMain lets the test binary be its own server process: startServer
// re-runs os.Executable() with -serve, which here is this binary.
func TestMain(m *testing.M) {
	if isServeMode(os.Args[1:]) {
		os.Exit(serveMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// TestSmokeInProcess runs the -smoke path for every system with its server
// in this process.
func TestSmokeInProcess(t *testing.T) {
	for _, name := range systemNames() {
		t.Run(name, func(t *testing.T) {
			r, err := smokeOne(systems[name], true)
			if err != nil {
				t.Fatal(err)
			}
			if r.Calls != smokeCalls || r.Errors != 0 {
				t.Fatalf("%d calls, %d errors; want %d, 0", r.Calls, r.Errors, smokeCalls)
			}
		})
	}
}

// TestSmokeSeparateProcess runs the -smoke path as `go run . -smoke` does:
// each server in a child process.
func TestSmokeSeparateProcess(t *testing.T) {
	var out bytes.Buffer
	if err := runSmoke(systemNames(), false, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if n := strings.Count(out.String(), " ok "); n != len(systems) {
		t.Fatalf("%d systems ok, want %d:\n%s", n, len(systems), out.String())
	}
}

// TestWrongEchoFails serves echoes that differ from the request and checks
// that the smoke path catches them as wrong replies.
func TestWrongEchoFails(t *testing.T) {
	wrongRPCD := rpcdSystem{register: func(reg *handler.Registry) {
		reg.HandleFunc(builtin.EchoPacket, func(_ context.Context, req, reply []byte) ([]byte, error) {
			reply = append(reply, req...)
			reply[len(reply)-1] ^= 0x80
			return reply, nil
		})
	}}
	shortRPCD := rpcdSystem{register: func(reg *handler.Registry) {
		reg.HandleFunc(builtin.EchoPacket, func(_ context.Context, req, reply []byte) ([]byte, error) {
			return append(reply, req[:len(req)-1]...), nil
		})
	}}
	for name, sys := range map[string]system{
		"tcp-floor flips a bit": tcpFloor{corrupt: true},
		"rpcd flips a bit":      wrongRPCD,
		"rpcd drops a byte":     shortRPCD,
	} {
		t.Run(name, func(t *testing.T) {
			r, err := smokeOne(sys, true)
			if err == nil {
				t.Fatal("smoke passed a wrong echo")
			}
			// The first call on each connection (a probe) or the load
			// itself must have seen it.
			if r.ErrorsBy["wrong reply"] == 0 && !errors.Is(err, loadgen.ErrWrongReply) {
				t.Fatalf("not flagged as a wrong reply: %v (%v)", err, r.ErrorsBy)
			}
		})
	}
}

func TestCheckEcho(t *testing.T) {
	for _, tc := range []struct {
		name      string
		want, got []byte
		ok        bool
	}{
		{"equal", []byte("abcd"), []byte("abcd"), true},
		{"both empty", []byte{}, nil, true},
		{"shorter", []byte("abcd"), []byte("abc"), false},
		{"longer", []byte("abcd"), []byte("abcde"), false},
		{"one byte differs", []byte("abcd"), []byte("abce"), false},
		{"nothing back", []byte("abcd"), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkEcho(tc.want, tc.got)
			if (err == nil) != tc.ok {
				t.Fatalf("checkEcho(%q, %q) = %v", tc.want, tc.got, err)
			}
			if err != nil && !errors.Is(err, loadgen.ErrWrongReply) {
				t.Fatalf("error %v does not match loadgen.ErrWrongReply", err)
			}
		})
	}
}

// staleCaller answers every call with the first request it saw: the
// sequence stamp must make the second call fail.
type staleCaller struct{ first []byte }

func (s *staleCaller) call(_ context.Context, _ int, req, reply []byte) ([]byte, error) {
	if s.first == nil {
		s.first = bytes.Clone(req)
	}
	return append(reply[:0], s.first...), nil
}

func (s *staleCaller) close() error { return nil }

func TestStaleReplyFails(t *testing.T) {
	for _, size := range []int{1, 16, 2000} {
		l := newLoad(context.Background(), &staleCaller{}, 1, size)
		if _, err := l.call(context.Background(), 0); err != nil {
			t.Fatalf("%d B: first call: %v", size, err)
		}
		if _, err := l.call(context.Background(), 0); !errors.Is(err, loadgen.ErrWrongReply) {
			t.Fatalf("%d B: a stale reply passed: %v", size, err)
		}
	}
}

func TestPatternsDifferPerWorker(t *testing.T) {
	a, b := make([]byte, 64), make([]byte, 64)
	fillPattern(a, 0)
	fillPattern(b, 1)
	if bytes.Equal(a[8:], b[8:]) {
		t.Fatal("workers 0 and 1 send the same pattern")
	}
}

func TestOrder(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	firsts := map[string]bool{}
	for r := range 4 {
		o := order(names, r)
		sorted := slices.Clone(o)
		slices.Sort(sorted)
		if !slices.Equal(sorted, names) {
			t.Fatalf("run %d: order %v is not a permutation of %v", r, o, names)
		}
		firsts[o[0]] = true
	}
	if len(firsts) < 4 {
		t.Fatalf("the same few systems always go first: %v", firsts)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(tc.xs); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
}

func TestPickFlags(t *testing.T) {
	if _, err := pickSystems("rpcd,nosuch"); !errors.Is(err, errNoSystem) {
		t.Errorf("unknown system: %v", err)
	}
	names, err := pickSystems("tcp-floor, rpcd")
	if err != nil || !slices.Equal(names, []string{"rpcd", "tcp-floor"}) {
		t.Errorf("pickSystems = %v, %v; want table order", names, err)
	}
	if _, err := pickCells("1x1-16B,2x2-3B"); err == nil {
		t.Error("unknown cell accepted")
	}
	cells, err := pickCells("all")
	if err != nil || len(cells) != len(allCells) {
		t.Errorf("pickCells(all) = %d cells, %v", len(cells), err)
	}
}

// TestBenchMain runs a tiny benchmark end to end, in-process, and reads
// back its JSON.
func TestBenchMain(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a small benchmark")
	}
	file := filepath.Join(t.TempDir(), "r.json")
	var out, errOut bytes.Buffer
	code := benchMain([]string{"-inproc", "-systems", "rpcd,tcp-floor", "-cells", "1x1-16B,1x128-16B",
		"-d", "100ms", "-warmup", "20ms", "-runs", "2", "-json", file}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"GOMAXPROCS=", "== 1x1-16B", "== 1x128-16B", "tcp-floor", "×rpcd", "in-process"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Cells) != 2 || len(rep.Cells[0].Systems) != 2 {
		t.Fatalf("JSON has %d cells", len(rep.Cells))
	}
	for _, c := range rep.Cells {
		for _, s := range c.Systems {
			if len(s.Runs) != 2 || s.Median == nil || s.Median.CallsPerSec <= 0 || s.Errors != 0 {
				t.Errorf("%s %s: %d runs, median %+v, %d errors", c.Name, s.System, len(s.Runs), s.Median, s.Errors)
			}
		}
		if c.Systems[0].CallsPerSecVsRPCD != 1 {
			t.Errorf("%s: rpcd's ratio to itself is %v", c.Name, c.Systems[0].CallsPerSecVsRPCD)
		}
	}
}

// TestRRQM runs the sequential Sum test in-process for every system that
// sums, with each result checked by runSum.
func TestRRQM(t *testing.T) {
	var out strings.Builder
	if err := runSum([]string{"rpcd", "grpc", "netrpc", "rpcx", "arpc", "kitex", "tcp-floor"}, 50, 1, true, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, name := range []string{"rpcd", "grpc", "netrpc", "rpcx", "arpc", "kitex"} {
		if !strings.Contains(out.String(), name) {
			t.Errorf("no row for %s:\n%s", name, out.String())
		}
	}
	if strings.Contains(out.String(), "tcp-floor") {
		t.Errorf("a system without Sum has a row:\n%s", out.String())
	}
}
