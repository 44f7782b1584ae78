// Command gateway measures rpcd's HTTP/JSON gateway, for docs/gateway.md
// and docs/performance.md:
//
//   - where it should sit: on a port of its own (rpcd serve -gateway), or
//     on the main port, each connection's first byte sniffed ("POST " or
//     rpcd's magic "RD") and the connection handed to gnet or to net/http;
//     what the sniffing costs rpcd's calls (calls/s, allocations) and its
//     new connections (connections/s), and what each option gives HTTP;
//   - what the gateway gives beside Go's net/http serving the same
//     function (Math/Sum) directly with encoding/json.
//
// HTTP load comes from wrk (apt-get install wrk), a process of its own;
// the servers run in this process, so its CPU time per request is the
// servers'. rpcd load comes from an rpcd client in this process. Every
// figure is the median of -runs runs, the systems interleaved.
//
//	cd bench && go run ./gateway -d 5s -runs 3
//
// With -shipped, it measures `rpcd serve -gateway` as users run it, a
// process of its own, beside net/http in a process of its own
// (shipped.go).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpcd/rpcd/bench/internal/cputime"
	"github.com/rpcd/rpcd/bench/internal/stat"
	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/gateway"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/reactor"
)

func main() {
	d := flag.Duration("d", 5*time.Second, "`duration` of each wrk run and each rpcd load run")
	runs := flag.Int("runs", 3, "runs of each measurement; figures are medians")
	wrkConns := flag.Int("c", 64, "wrk's connections")
	wrkThreads := flag.Int("t", 1, "wrk's threads")
	callers := flag.Int("callers", 32, "rpcd callers (one client, 2 connections)")
	dials := flag.Int("dials", 2000, "connections opened (each with one call) per connection-rate run")
	shipped := flag.String("shipped", "", "measure `rpcd` (the path of its binary) serving -gateway in its own process against net/http in its own process (the flags after -- go to rpcd serve), instead of the servers in this process")
	before := flag.String("before", "", "with -shipped: also measure `rpcd` (the path of another binary, as built before a change) serving -gateway the same way, in the same rounds")
	jsonOut := flag.String("json", "", "with -shipped: write the runs to this `file`")
	direct := flag.String("direct", "", "serve the net/http sum on this `address` and nothing else (what -shipped starts)")
	directGateway := flag.Bool("direct-gateway", false, "with -direct: serve the gateway on the same minimal http.Server instead")
	directDaemon := flag.Bool("direct-daemon-server", false, "with -direct-gateway: configure the http.Server as rpcd serve does")
	withServer := flag.Bool("daemon-server", false, "with -shipped: also measure the gateway on an http.Server configured as rpcd serve's, in a process without the rest of rpcd serve")
	flag.Parse()
	var err error
	switch {
	case *direct != "":
		err = serveDirect(*direct, *directGateway, *directDaemon)
	case *shipped != "":
		err = runShipped(*shipped, *before, flag.Args(), *d, *runs, *wrkConns, *wrkThreads, *jsonOut, *withServer)
	default:
		err = run(*d, *runs, *wrkConns, *wrkThreads, *callers, *dials)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

func run(d time.Duration, runs, wrkConns, wrkThreads, callers, dials int) error {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		return errors.New("wrk not found: apt-get install wrk")
	}
	reg := handler.NewRegistry()
	builtin.Register(reg)

	// The main port alone, and the gateway on a port of its own.
	plain := reactor.New(reg, reactor.Options{})
	if err := plain.Start("127.0.0.1:0"); err != nil {
		return err
	}
	defer plain.Shutdown(context.Background())
	own, err := serveHTTP(gateway.New(reg, gateway.Options{}), nil)
	if err != nil {
		return err
	}
	defer own.Close()

	// One port for both: the sniffer hands connections to a reactor and
	// to net/http.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	sn := newSniffer(ln, 30*time.Second)
	go sn.serve()
	sniffed := reactor.New(reg, reactor.Options{})
	go sniffed.Serve(sn.rpcd)
	defer sniffed.Shutdown(context.Background())
	shared, err := serveHTTP(gateway.New(reg, gateway.Options{}), sn.http)
	if err != nil {
		return err
	}
	defer shared.Close()
	defer ln.Close()

	// Go's net/http serving the same function directly.
	mux := http.NewServeMux()
	mux.HandleFunc("POST /rpc/Math/Sum", directSum)
	direct, err := serveHTTP(mux, nil)
	if err != nil {
		return err
	}
	defer direct.Close()

	addrs := map[string]string{"main port alone": plain.Addr().String(), "main port, sniffed": ln.Addr().String()}
	urls := []struct{ name, url string }{
		{"gateway, own port", "http://" + own.addr + "/rpc/Math/Sum"},
		{"gateway, main port sniffed", "http://" + ln.Addr().String() + "/rpc/Math/Sum"},
		{"net/http direct", "http://" + direct.addr + "/rpc/Math/Sum"},
	}
	for _, u := range urls {
		if err := checkSum(u.url); err != nil {
			return fmt.Errorf("%s: %v", u.name, err)
		}
	}
	script := filepath.Join(os.TempDir(), fmt.Sprintf("rpcd-gateway-%d.lua", os.Getpid()))
	if err := os.WriteFile(script, []byte("wrk.method = \"POST\"\nwrk.body = '{\"a\":1,\"b\":2}'\nwrk.headers[\"Content-Type\"] = \"application/json\"\n"), 0o600); err != nil {
		return err
	}
	defer os.Remove(script)

	fmt.Printf("# %d runs, interleaved; GOMAXPROCS %d; wrk -t%d -c%d -d%v, rpcd %d callers over 2 connections for %v, %d dials per rate run\n\n",
		runs, runtimeProcs(), wrkThreads, wrkConns, d, callers, d, dials)

	rps := map[string][]float64{}
	cpu := map[string][]float64{}
	calls := map[string][]float64{}
	dialRate := map[string][]float64{}
	allocs := map[string][]float64{}
	for r := 1; r <= runs; r++ {
		for _, u := range urls {
			before := cputime.Self()
			n, secs, err := runWrk(wrk, script, u.url, wrkThreads, wrkConns, d)
			if err != nil {
				return fmt.Errorf("%s: %v", u.name, err)
			}
			used := cputime.Self() - before
			rps[u.name] = append(rps[u.name], float64(n)/secs)
			cpu[u.name] = append(cpu[u.name], float64(used.Microseconds())/float64(n))
			fmt.Fprintf(os.Stderr, "run %d %-28s %10.0f req/s %6.1f µs CPU/req\n", r, u.name, float64(n)/secs, float64(used.Microseconds())/float64(n))
		}
		for _, name := range []string{"main port alone", "main port, sniffed"} {
			n, a, err := loadRPCD(addrs[name], callers, d)
			if err != nil {
				return fmt.Errorf("%s: %v", name, err)
			}
			calls[name] = append(calls[name], n)
			allocs[name] = append(allocs[name], a)
			rate, err := dialLoop(addrs[name], dials)
			if err != nil {
				return fmt.Errorf("%s: %v", name, err)
			}
			dialRate[name] = append(dialRate[name], rate)
			fmt.Fprintf(os.Stderr, "run %d %-28s %10.0f calls/s %4.2f allocs/call %8.0f dials/s\n", r, name, n, a, rate)
		}
	}

	fmt.Println("| HTTP: POST /rpc/Math/Sum | requests/s (median) | server CPU µs/request | runs |")
	fmt.Println("| --- | ---: | ---: | --- |")
	for _, u := range urls {
		fmt.Printf("| %s | %.0f | %.1f | %s |\n", u.name, median(rps[u.name]), median(cpu[u.name]), list(rps[u.name], "%.0f"))
	}
	fmt.Println()
	fmt.Println("| rpcd: Bench/EchoPacket, 16 B | calls/s (median) | allocations/call | new connections/s (median) | runs (calls/s; connections/s) |")
	fmt.Println("| --- | ---: | ---: | ---: | --- |")
	for _, name := range []string{"main port alone", "main port, sniffed"} {
		fmt.Printf("| %s | %.0f | %.2f | %.0f | %s; %s |\n", name, median(calls[name]), median(allocs[name]), median(dialRate[name]),
			list(calls[name], "%.0f"), list(dialRate[name], "%.0f"))
	}
	return nil
}

// httpServer is a net/http server on loopback.
type httpServer struct {
	srv  *http.Server
	addr string
}

func (s *httpServer) Close() { _ = s.srv.Close() }

// serveHTTP serves h on ln, or on a new loopback listener if ln is nil.
func serveHTTP(h http.Handler, ln net.Listener) (*httpServer, error) {
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return nil, err
		}
	}
	s := &httpServer{srv: &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}, addr: ln.Addr().String()}
	go s.srv.Serve(ln)
	return s, nil
}

// directSum is Math/Sum as a net/http handler with encoding/json: what a
// Go program serves without rpcd.
func directSum(w http.ResponseWriter, r *http.Request) {
	var in struct{ A, B int }
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<20)).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out, _ := json.Marshal(in.A + in.B)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	_, _ = w.Write(out)
}

// checkSum checks that url answers 3 to {"a":1,"b":2}.
func checkSum(url string) error {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Post(url, "application/json", stringsReader(`{"a":1,"b":2}`))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var n int
	if err := json.NewDecoder(resp.Body).Decode(&n); err != nil || resp.StatusCode != 200 || n != 3 {
		return fmt.Errorf("status %d, reply %d, %v; want 200 and 3", resp.StatusCode, n, err)
	}
	return nil
}

var (
	wrkRequests = regexp.MustCompile(`(\d+) requests in ([\d.]+)(us|ms|s|m)`)
	wrkBad      = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)|Socket errors: .*`)
)

// runWrk runs wrk against url and returns the requests it made and the
// seconds they took.
func runWrk(wrk, script, url string, threads, conns int, d time.Duration) (int, float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, wrk, "-t"+strconv.Itoa(threads), "-c"+strconv.Itoa(conns),
		"-d"+strconv.Itoa(int(d.Seconds()))+"s", "-s", script, url).CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("wrk: %v\n%s", err, out)
	}
	if m := wrkBad.Find(out); m != nil {
		return 0, 0, fmt.Errorf("wrk: %s\n%s", m, out)
	}
	m := wrkRequests.FindSubmatch(out)
	if m == nil {
		return 0, 0, fmt.Errorf("wrk printed no request count:\n%s", out)
	}
	n, _ := strconv.Atoi(string(m[1]))
	secs, _ := strconv.ParseFloat(string(m[2]), 64)
	switch string(m[3]) {
	case "us":
		secs /= 1e6
	case "ms":
		secs /= 1e3
	case "m":
		secs *= 60
	}
	return n, secs, nil
}

// loadRPCD calls Bench/EchoPacket with 16 bytes from callers goroutines
// for d and returns calls/s, then the allocations of one call (client and
// server, this process).
func loadRPCD(addr string, callers int, d time.Duration) (float64, float64, error) {
	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{Conns: 2})
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	var n atomic.Int64
	var firstErr atomic.Value
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, reply := make([]byte, 16), make([]byte, 0, 64)
			for time.Now().Before(stop) {
				var err error
				if reply, err = c.CallRaw(ctx, builtin.EchoPacket, req, reply[:0]); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	rate := float64(n.Load()) / time.Since(start).Seconds()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, 0, err
	}
	req, reply := make([]byte, 16), make([]byte, 0, 64)
	a := testing.AllocsPerRun(2000, func() { reply, _ = c.CallRaw(ctx, builtin.EchoPacket, req, reply[:0]) })
	return rate, a, nil
}

// dialLoop opens n connections one after another, makes one call on each
// and closes it, and returns connections/s.
func dialLoop(addr string, n int) (float64, error) {
	ctx := context.Background()
	start := time.Now()
	reply := make([]byte, 0, 64)
	for range n {
		c, err := client.Dial(ctx, addr, client.Options{})
		if err != nil {
			return 0, err
		}
		reply, err = c.CallRaw(ctx, builtin.EchoPacket, []byte("ping"), reply[:0])
		c.Close()
		if err != nil {
			return 0, err
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func median(xs []float64) float64 { return stat.Median(xs, func(x float64) float64 { return x }) }

func list(xs []float64, format string) string {
	out := ""
	for i, x := range xs {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf(format, x)
	}
	return out
}
