// Command fanout measures publish/subscribe fan-out: one publisher, -subs
// subscribers on connections of their own, every message to every
// subscriber. It runs rpcd (`rpcd bench -scenario FanOut` against an
// `rpcd serve` process) beside a floor: a bare TCP relay, a goroutine per
// connection, that writes each length-prefixed message to every subscriber
// with buffered writes, loaded by this program the same way (the publisher
// stays at most 512 messages ahead of the slowest subscriber). Runs are
// interleaved; figures are medians. CPU is the user and system time of the
// load generator and the server process together, per delivered message.
//
//	cd bench && go run ./fanout -d 5s -runs 3
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/bench/internal/cputime"
	"github.com/rpcd/rpcd/bench/internal/stat"
)

const window = 512 // messages the publisher may run ahead of the slowest subscriber

func main() {
	serveFloor := flag.Bool("serve-floor", false, "run the floor's relay server on 127.0.0.1:0 and print its address (used by this program itself)")
	d := flag.Duration("d", 5*time.Second, "`duration` of each run after its warm-up")
	warmup := flag.Duration("warmup", time.Second, "warm-up of each run")
	runs := flag.Int("runs", 3, "runs of each system; figures are medians")
	subs := flag.Int("subs", 100, "subscribers")
	size := flag.Int("size", 16, "message size in bytes (at least 16)")
	flag.Parse()
	if *serveFloor {
		runFloorServer()
		return
	}
	*size = max(*size, 16)

	dir, err := os.MkdirTemp("", "rpcd-fanout")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	rpcd := filepath.Join(dir, "rpcd")
	build := exec.Command("go", "build", "-o", rpcd, "./cmd/rpcd")
	build.Dir = ".." // the main module, from bench/
	if out, err := build.CombinedOutput(); err != nil {
		log.Fatalf("building rpcd: %v\n%s", err, out)
	}
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}

	rpcdSrv, rpcdAddr := startServer(rpcd, "serve", "-addr", "127.0.0.1:0", "-max-conns", strconv.Itoa(*subs+16))
	defer rpcdSrv.Process.Kill()
	floorSrv, floorAddr := startServer(self, "-serve-floor")
	defer floorSrv.Process.Kill()

	type result struct{ perSec, p50, p99, cpuPerMsg float64 }
	results := map[string][]result{}
	for run := range *runs {
		order := []string{"rpcd", "tcp-floor"}
		if run%2 == 1 {
			slices.Reverse(order)
		}
		for _, sys := range order {
			var r result
			switch sys {
			case "rpcd":
				srv0 := procCPU(rpcdSrv.Process.Pid)
				out, err := exec.Command(rpcd, "bench", "-addr", rpcdAddr, "-scenario", "FanOut", "-subs", strconv.Itoa(*subs),
					"-size", strconv.Itoa(*size), "-d", d.String(), "-warmup", warmup.String(), "-json").Output()
				if err != nil {
					log.Fatalf("rpcd bench: %v", err)
				}
				var rep struct {
					Delivered   float64 `json:"delivered"`
					DeliveredPS float64 `json:"delivered_per_sec"`
					P50         float64 `json:"p50_us"`
					P99         float64 `json:"p99_us"`
					CPU         float64 `json:"cpu_per_delivered_us"`
				}
				if err := json.Unmarshal(out, &rep); err != nil {
					log.Fatalf("rpcd bench output: %v\n%s", err, out)
				}
				// The server's CPU over the whole run, warm-up included,
				// spread over the messages at the measured rate.
				srv := procCPU(rpcdSrv.Process.Pid) - srv0
				all := rep.DeliveredPS * (d.Seconds() + warmup.Seconds())
				r = result{rep.DeliveredPS, rep.P50, rep.P99, rep.CPU + srv.Seconds()*1e6/all}
			case "tcp-floor":
				srv0 := procCPU(floorSrv.Process.Pid)
				perSec, p50, p99, cpuMsg, all := loadFloor(floorAddr, *subs, *size, *warmup, *d)
				srv := procCPU(floorSrv.Process.Pid) - srv0
				r = result{perSec, p50, p99, cpuMsg + srv.Seconds()*1e6/all}
			}
			results[sys] = append(results[sys], r)
			fmt.Fprintf(os.Stderr, "run %d %-9s %9.0f msgs/s delivered, p50 %6.0f µs, p99 %7.0f µs, %.2f µs CPU/msg\n", run+1, sys, r.perSec, r.p50, r.p99, r.cpuPerMsg)
		}
	}
	fmt.Printf("== fan-out: 1 publisher, %d subscribers, %d-byte messages · median of %d runs\n", *subs, *size, *runs)
	fmt.Printf("%10s %14s %8s %8s %9s %12s\n", "system", "delivered/s", "×rpcd", "p50 µs", "p99 µs", "CPU µs/msg")
	base := stat.Median(results["rpcd"], func(r result) float64 { return r.perSec })
	for _, sys := range []string{"rpcd", "tcp-floor"} {
		rs := results[sys]
		ps := stat.Median(rs, func(r result) float64 { return r.perSec })
		fmt.Printf("%10s %14.0f %8.2f %8.0f %9.0f %12.2f\n", sys, ps, ps/base,
			stat.Median(rs, func(r result) float64 { return r.p50 }), stat.Median(rs, func(r result) float64 { return r.p99 }),
			stat.Median(rs, func(r result) float64 { return r.cpuPerMsg }))
	}
}

// startServer starts a server process and returns it with the address it
// prints ("addr=HOST:PORT" in rpcd's log, or the floor's first line).
func startServer(bin string, args ...string) (*exec.Cmd, string) {
	cmd := exec.Command(bin, args...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		log.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		for _, f := range strings.Fields(sc.Text()) {
			if a, ok := strings.CutPrefix(f, "addr="); ok {
				go io.Copy(io.Discard, pipe)
				return cmd, a
			}
		}
	}
	log.Fatalf("%s %v did not print its address", bin, args)
	return nil, ""
}

// procCPU returns process pid's CPU time; 0 if it cannot be read.
func procCPU(pid int) time.Duration {
	d, _ := cputime.Process(pid)
	return d
}

// runFloorServer is the floor's relay: a connection that says 'S' is a
// subscriber, one that says 'P' publishes length-prefixed messages that go
// to every subscriber, each with a writer goroutine that flushes when it
// has nothing more queued.
func runFloorServer() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "floor serving addr=%s\n", ln.Addr())
	var mu sync.Mutex
	var subs []chan []byte
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer nc.Close()
			var role [1]byte
			if _, err := io.ReadFull(nc, role[:]); err != nil {
				return
			}
			if role[0] == 'S' {
				ch := make(chan []byte, 4*window)
				mu.Lock()
				subs = append(subs, ch)
				mu.Unlock()
				defer func() { // leave the list, so later runs do not pay for this one
					mu.Lock()
					subs = slices.DeleteFunc(subs, func(c chan []byte) bool { return c == ch })
					mu.Unlock()
				}()
				w := bufio.NewWriterSize(nc, 64<<10)
				for m := range ch {
					w.Write(m)
					if len(ch) == 0 && w.Flush() != nil {
						return
					}
				}
				return
			}
			r := bufio.NewReaderSize(nc, 64<<10)
			for {
				var n [4]byte
				if _, err := io.ReadFull(r, n[:]); err != nil {
					return
				}
				m := make([]byte, 4+binary.BigEndian.Uint32(n[:]))
				copy(m, n[:])
				if _, err := io.ReadFull(r, m[4:]); err != nil {
					return
				}
				mu.Lock()
				for _, ch := range subs {
					select {
					case ch <- m:
					default: // a subscriber that does not keep up misses it, as rpcd drops
					}
				}
				mu.Unlock()
			}
		}()
	}
}

// loadFloor loads the relay at addr: subs subscribers and one publisher,
// for warmup then d. It returns messages delivered per second, p50 and p99
// latency in µs, this process's CPU per delivered message in µs, and the
// messages delivered over warm-up and measurement together.
func loadFloor(addr string, subs, size int, warmup, d time.Duration) (perSec, p50, p99, cpuPerMsg, all float64) {
	received := make([]atomic.Uint64, subs)
	var measureFrom atomic.Uint64
	measureFrom.Store(1<<64 - 1)
	var latMu sync.Mutex
	var lats []float64
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	var conns []net.Conn
	for i := range subs {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			log.Fatal(err)
		}
		conns = append(conns, nc)
		nc.Write([]byte{'S'})
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := bufio.NewReaderSize(nc, 64<<10)
			var local []float64
			defer func() { latMu.Lock(); lats = append(lats, local...); latMu.Unlock() }()
			buf := make([]byte, 4+size)
			for ctx.Err() == nil {
				if _, err := io.ReadFull(r, buf); err != nil {
					return
				}
				if binary.BigEndian.Uint64(buf[4:]) > measureFrom.Load() {
					sent := int64(binary.BigEndian.Uint64(buf[12:]))
					local = append(local, float64(time.Now().UnixNano()-sent)/1000)
				}
				received[i].Add(1)
			}
		}()
	}
	time.Sleep(100 * time.Millisecond) // let the relay take every subscriber in
	pub, err := net.Dial("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	pub.Write([]byte{'P'})
	w := bufio.NewWriterSize(pub, 64<<10)
	minReceived := func() uint64 {
		m := received[0].Load()
		for i := range received[1:] {
			m = min(m, received[i+1].Load())
		}
		return m
	}
	msg := make([]byte, 4+size)
	binary.BigEndian.PutUint32(msg, uint32(size))
	var published uint64
	publish := func(until time.Time) {
		for time.Now().Before(until) {
			for published-minReceived() >= window {
				if time.Now().After(until) {
					return
				}
				time.Sleep(50 * time.Microsecond)
			}
			for range 16 {
				published++
				binary.BigEndian.PutUint64(msg[4:], published)
				binary.BigEndian.PutUint64(msg[12:], uint64(time.Now().UnixNano()))
				w.Write(msg)
			}
			w.Flush()
		}
	}
	publish(time.Now().Add(warmup))
	startPub := published
	var startRecv uint64
	for i := range received {
		startRecv += received[i].Load()
	}
	measureFrom.Store(startPub)
	cpu0 := cputime.Self()
	began := time.Now()
	publish(began.Add(d))
	for wait := time.Now().Add(2 * time.Second); minReceived() < published && time.Now().Before(wait); {
		time.Sleep(time.Millisecond)
	}
	secs := time.Since(began).Seconds()
	cpu := cputime.Self() - cpu0
	var total uint64
	for i := range received {
		total += received[i].Load()
	}
	delivered := float64(total-startRecv) / secs
	cancel()
	pub.Close()
	for _, nc := range conns {
		nc.Close()
	}
	wg.Wait()
	slices.Sort(lats)
	if len(lats) > 0 {
		p50, p99 = lats[len(lats)/2], lats[len(lats)*99/100]
	}
	return delivered, p50, p99, cpu.Seconds() * 1e6 / float64(total-startRecv), float64(total)
}
