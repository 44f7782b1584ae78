// Command clientload measures client.Client itself. It measures calls at
// many in flight on one connection: N callers of 16-byte raw echoes
// (Bench/EchoPacket) against a server that serves builtin.Stats (rpcd
// serve), as N goroutines calling CallRaw (sync), as N chains of
// CallRawAsync whose done functions start the next call (async), as N
// AsyncCallers doing the same (caller), or as the N tags of one Pipe doing
// the same (pipe), with the calls/s, this process's
// CPU time per call and the server's (from its Sys/Stats) side by side
// (docs/performance.md, "The client"). Modes alternate, -rounds times, and
// the medians are printed:
//
//	rpcd serve -addr 127.0.0.1:7170 &
//	cd bench && go run ./clientload -addr 127.0.0.1:7170 -callers 128 -d 3s -rounds 5
//
// Instead, with -idle N it dials one client of N connections and reports
// what each costs the process idle: goroutines, heap in use, stacks and
// resident memory; with -churn D it dials a client, makes one call and
// closes it, one after another, for D: how fast the server takes new
// connections.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/bench/internal/cputime"
	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/load"
	"github.com/rpcd/rpcd/proto"
)

// run is one measured run of a mode.
type run struct {
	Mode           string  `json:"mode"`
	CallsPerSec    float64 `json:"calls_per_sec"`
	ClientCPUPerUS float64 `json:"client_cpu_per_call_us"`
	ServerCPUPerUS float64 `json:"server_cpu_per_call_us"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:7170", "the server's `address`")
	callers := flag.Int("callers", 128, "calls in flight on the connection")
	d := flag.Duration("d", 3*time.Second, "each run's length, after a warm-up of a second")
	rounds := flag.Int("rounds", 5, "runs of each mode, alternated")
	out := flag.String("json", "", "write every run and the medians to this `file`")
	idle := flag.Int("idle", 0, "instead, dial one client of `N` connections and report what each costs idle")
	churn := flag.Duration("churn", 0, "instead, for `D`, dial a client, make one call and close it, one after another, and report how many and how long each took")
	only := flag.String("mode", "", "run these `modes` alone (sync, async, caller, pipe; comma-separated), not all four")
	cpuprofile := flag.String("cpuprofile", "", "write this process's CPU profile over the measured runs to `file`")
	flag.Parse()
	if *idle > 0 {
		idleCost(*addr, *idle)
		return
	}
	if *churn > 0 {
		connChurn(*addr, *churn)
		return
	}

	ctx := context.Background()
	c, err := client.Dial(ctx, *addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	stats, err := client.Dial(ctx, *addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer stats.Close()
	serverCPU := load.ServerCPUFromStats(stats, 5*time.Second)

	modes := map[string]func(time.Duration) int64{
		"sync":   func(d time.Duration) int64 { return syncCalls(c, *callers, d) },
		"async":  func(d time.Duration) int64 { return asyncCalls(c, *callers, d) },
		"caller": func(d time.Duration) int64 { return callerCalls(c, *callers, d) },
		"pipe":   func(d time.Duration) int64 { return pipeCalls(c, *callers, d) },
	}
	chosen := []string{"sync", "async", "caller", "pipe"}
	if *only != "" {
		chosen = strings.Split(*only, ",")
	}
	for _, m := range chosen {
		if modes[m] == nil {
			log.Fatalf("-mode %s: want sync, async, caller or pipe", m)
		}
	}
	var runs []run
	for r := range *rounds {
		order := slices.Clone(chosen)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, mode := range order {
			modes[mode](time.Second) // warm-up
			if *cpuprofile != "" {
				startProfile(*cpuprofile)
			}
			s0, err := serverCPU()
			if err != nil {
				log.Fatal(err)
			}
			c0, start := cputime.Self(), time.Now()
			n := modes[mode](*d)
			el, c1 := time.Since(start), cputime.Self()
			pprof.StopCPUProfile()
			s1, err := serverCPU()
			if err != nil {
				log.Fatal(err)
			}
			rn := run{Mode: mode, CallsPerSec: float64(n) / el.Seconds(),
				ClientCPUPerUS: float64((c1 - c0).Nanoseconds()) / 1e3 / float64(n),
				ServerCPUPerUS: float64((s1 - s0).Nanoseconds()) / 1e3 / float64(n)}
			runs = append(runs, rn)
			fmt.Printf("round %d  %-6s %9.0f calls/s  client %.3f us/call  server %.3f us/call\n", r+1, mode, rn.CallsPerSec, rn.ClientCPUPerUS, rn.ServerCPUPerUS)
		}
	}
	medians := map[string]run{}
	for _, mode := range chosen {
		var cps, ccpu, scpu []float64
		for _, rn := range runs {
			if rn.Mode == mode {
				cps, ccpu, scpu = append(cps, rn.CallsPerSec), append(ccpu, rn.ClientCPUPerUS), append(scpu, rn.ServerCPUPerUS)
			}
		}
		m := run{Mode: mode, CallsPerSec: median(cps), ClientCPUPerUS: median(ccpu), ServerCPUPerUS: median(scpu)}
		medians[mode] = m
		fmt.Printf("median    %-6s %9.0f calls/s  client %.3f us/call  server %.3f us/call\n", mode, m.CallsPerSec, m.ClientCPUPerUS, m.ServerCPUPerUS)
	}
	if *out != "" {
		b, _ := json.MarshalIndent(map[string]any{"callers": *callers, "duration": d.String(), "runs": runs, "medians": medians}, "", " ")
		if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

// syncCalls has n goroutines call CallRaw without pause for d and returns
// the calls made.
func syncCalls(c *client.Client, n int, d time.Duration) int64 {
	var calls atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, reply := make([]byte, 16), make([]byte, 0, 64)
			for !stop.Load() {
				var err error
				if reply, err = c.CallRaw(context.Background(), builtin.EchoPacket, req, reply[:0]); err != nil {
					log.Fatal(err)
				}
				calls.Add(1)
			}
		}()
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	return calls.Load()
}

// asyncCalls keeps n chains of CallRawAsync going for d, each done
// function starting its chain's next call, and returns the calls made.
func asyncCalls(c *client.Client, n int, d time.Duration) int64 {
	return chains(n, d, func(req, reply []byte, done func([]byte, error)) func() {
		return func() { c.CallRawAsync(context.Background(), builtin.EchoPacket, req, reply[:0], done) }
	})
}

// callerCalls is asyncCalls through n client.AsyncCallers.
func callerCalls(c *client.Client, n int, d time.Duration) int64 {
	return chains(n, d, func(req, reply []byte, done func([]byte, error)) func() {
		a := c.NewAsyncCaller(done)
		return func() { a.Call(proto.CodecRaw, builtin.EchoPacket, req, reply[:0]) }
	})
}

// pipeCalls is asyncCalls through one client.Pipe of n tags, each done
// function starting its tag's next call with the pipe held (Pipe.Next),
// the first calls in one write (Pipe.Run).
func pipeCalls(c *client.Client, n int, d time.Duration) int64 {
	var t callTally
	t.wg.Add(n)
	reqs, replies := make([][]byte, n), make([][]byte, n)
	var p *client.Pipe
	p = c.NewPipe(n, func(tag int, _ []byte, err error) {
		if t.answered(err) {
			p.Next(tag, proto.CodecRaw, builtin.EchoPacket, reqs[tag], replies[tag][:0])
		}
	})
	p.Run(func() {
		for i := range n {
			reqs[i], replies[i] = make([]byte, 16), make([]byte, 0, 64)
			p.Next(i, proto.CodecRaw, builtin.EchoPacket, reqs[i], replies[i][:0])
		}
	})
	return t.runFor(d)
}

// callTally counts a mode's calls, each caller's until the mode stops.
type callTally struct {
	calls atomic.Int64
	stop  atomic.Bool
	wg    sync.WaitGroup // a caller each, done once it stops
}

// answered counts a call answered, and reports whether its caller goes on.
func (t *callTally) answered(err error) bool {
	if err != nil {
		log.Fatal(err)
	}
	t.calls.Add(1)
	if t.stop.Load() {
		t.wg.Done()
		return false
	}
	return true
}

// runFor lets the callers call for d, stops them and returns their calls.
func (t *callTally) runFor(d time.Duration) int64 {
	time.Sleep(d)
	t.stop.Store(true)
	t.wg.Wait()
	return t.calls.Load()
}

// chains keeps n chains of 16-byte echoes going for d and returns the
// calls made: newChain returns what starts one of a chain's calls, whose
// completion done is told of and starts the next.
func chains(n int, d time.Duration, newChain func(req, reply []byte, done func([]byte, error)) func()) int64 {
	var t callTally
	t.wg.Add(n)
	for range n {
		var start func()
		start = newChain(make([]byte, 16), make([]byte, 0, 64), func(_ []byte, err error) {
			if t.answered(err) {
				start()
			}
		})
		start()
	}
	return t.runFor(d)
}

// connChurn dials a client of addr, makes one Sys/Ping and closes it, one
// after another for d, and prints how many it made and the p50 and p90 of
// each one's time: how fast the server takes new connections.
func connChurn(addr string, d time.Duration) {
	ctx := context.Background()
	var took []time.Duration
	for end := time.Now().Add(d); time.Now().Before(end); {
		t := time.Now()
		c, err := client.Dial(ctx, addr, client.Options{})
		if err != nil {
			log.Fatal(err)
		}
		if _, err := c.CallRaw(ctx, builtin.Ping, nil, nil); err != nil {
			log.Fatal(err)
		}
		c.Close()
		took = append(took, time.Since(t))
	}
	slices.Sort(took)
	fmt.Printf("%d connections in %v, each dialled, called once and closed: p50 %v, p90 %v\n", len(took), d, took[len(took)/2], took[len(took)*9/10])
}

// idleCost dials a client of n connections to addr and prints what each
// costs the process once connected and idle.
func idleCost(addr string, n int) {
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	r0, g0 := residentBytes(), runtime.NumGoroutine()
	c, err := client.Dial(context.Background(), addr, client.Options{Conns: n})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	time.Sleep(time.Second) // the connections' goroutines settle
	runtime.GC()
	runtime.ReadMemStats(&m1)
	per := func(v float64) float64 { return v / float64(n) }
	fmt.Printf("%d connections, each: %.1f goroutines, %.1f KiB of heap in use, %.1f KiB of stacks, %.1f KiB resident\n", n,
		per(float64(runtime.NumGoroutine()-g0)), per(float64(m1.HeapInuse)-float64(m0.HeapInuse))/1024,
		per(float64(m1.StackInuse)-float64(m0.StackInuse))/1024, per(float64(residentBytes()-r0))/1024)
}

// residentBytes is the process's resident memory (Linux), 0 elsewhere.
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	return v[(len(v)-1)/2]
}

// startProfile starts the CPU profile of a measured run, into path: the
// last run's, when there are several.
func startProfile(path string) {
	f, err := os.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		log.Fatal(err)
	}
}
