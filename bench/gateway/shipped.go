package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/netutil"

	"github.com/rpcd/rpcd/bench/internal/cputime"
	"github.com/rpcd/rpcd/gateway"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
)

// The gateway as users run it: `rpcd serve -gateway` in a process of its
// own, beside a minimal net/http server doing the same sum with
// encoding/json in a process of its own (this command, run again with
// -direct), each loaded by wrk in turn, the rounds interleaved. A
// server's CPU per request is its process's user plus system time
// (/proc/PID/stat) over the requests wrk made.
//
//	go build -o /tmp/rpcd ./cmd/rpcd
//	cd bench && go run ./gateway -shipped /tmp/rpcd -c 32 -d 5s -runs 5 -json OUT

// shippedRun is one wrk run of one server.
type shippedRun struct {
	Round       int     `json:"round"`
	System      string  `json:"system"`
	Requests    int     `json:"requests"`
	Seconds     float64 `json:"seconds"`
	PerSec      float64 `json:"requests_per_sec"`
	CPUPerReqUS float64 `json:"server_cpu_per_request_us"`
}

// serveDirect serves directSum at POST /rpc/Math/Sum on addr until the
// process is killed: the net/http side of -shipped, in its own process.
// With gw set, it serves the gateway (the built-in routes) instead, on the
// same minimal http.Server: the gateway's handler without the rest of
// rpcd serve.
//
// With daemonServer set too, the http.Server is configured as rpcd serve's
// (daemon/gateway.go): a read timeout for the whole request, an idle
// timeout, a header limit and the connection cap's listener.
func serveDirect(addr string, gw, daemonServer bool) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{ReadHeaderTimeout: 30 * time.Second}
	if daemonServer {
		ln = netutil.LimitListener(ln, 10000)
		srv.ReadTimeout, srv.IdleTimeout, srv.MaxHeaderBytes = 30*time.Second, 2*time.Minute, 64<<10
	}
	var h http.Handler
	if gw {
		reg := handler.NewRegistry()
		builtin.Register(reg)
		h = gateway.New(reg, gateway.Options{})
	} else {
		mux := http.NewServeMux()
		mux.HandleFunc("POST /rpc/Math/Sum", directSum)
		h = mux
	}
	fmt.Println("serving", ln.Addr()) // read by -shipped
	srv.Handler = h
	return srv.Serve(ln)
}

// child is a server process started for -shipped.
type child struct {
	name string
	cmd  *exec.Cmd
	url  string
}

// startChild starts args and waits for the line that names its address:
// want is a prefix of it, the address the last field.
func startChild(name string, args []string, want string, extraEnv ...string) (*child, error) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), extraEnv...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if i := strings.Index(line, want); i >= 0 {
				select {
				case found <- addrIn(line[i+len(want):]):
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case addr := <-found:
		return &child{name: name, cmd: cmd, url: "http://" + addr + "/rpc/Math/Sum"}, nil
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("%s: no address printed within 20s", name)
	}
}

// addrIn returns the first host:port in s (after "gateway=" for rpcd's
// log line, or alone).
func addrIn(s string) string {
	for f := range strings.FieldsSeq(s) {
		f = strings.TrimPrefix(f, "gateway=")
		if _, _, err := net.SplitHostPort(f); err == nil {
			return f
		}
	}
	return strings.TrimSpace(s)
}

func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// runShipped measures rpcd (the path of an rpcd binary) serving its
// gateway against net/http in its own process.
// With before set (the path of another rpcd binary), that binary serves
// too, the same way, as one more system: a change measured beside what it
// changes, in the same rounds.
func runShipped(rpcd, before string, extra []string, d time.Duration, runs, wrkConns, wrkThreads int, jsonOut string, withServer bool) error {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		return errors.New("wrk not found: apt-get install wrk")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	args := append([]string{rpcd, "serve", "-addr", "127.0.0.1:0", "-gateway", "127.0.0.1:0"}, extra...)
	gw, err := startChild("rpcd serve -gateway", args, "rpcd: gateway serving")
	if err != nil {
		return err
	}
	defer gw.stop()
	direct, err := startChild("net/http", []string{self, "-direct", "127.0.0.1:0"}, "serving ")
	if err != nil {
		return err
	}
	defer direct.stop()
	handlerOnly, err := startChild("gateway on net/http", []string{self, "-direct", "127.0.0.1:0", "-direct-gateway"}, "serving ")
	if err != nil {
		return err
	}
	defer handlerOnly.stop()
	systems := []*child{gw, handlerOnly, direct}
	if before != "" {
		old, err := startChild("rpcd serve -gateway, before", append([]string{before}, args[1:]...), "rpcd: gateway serving")
		if err != nil {
			return err
		}
		defer old.stop()
		systems = append(systems, old)
	}
	if withServer {
		daemonServer, err := startChild("gateway on rpcd's http.Server", []string{self, "-direct", "127.0.0.1:0", "-direct-gateway", "-direct-daemon-server"}, "serving ")
		if err != nil {
			return err
		}
		defer daemonServer.stop()
		systems = append(systems, daemonServer)
	}
	for _, c := range systems {
		if err := checkSum(c.url); err != nil {
			return fmt.Errorf("%s: %v", c.name, err)
		}
	}
	script := filepath.Join(os.TempDir(), fmt.Sprintf("rpcd-gateway-%d.lua", os.Getpid()))
	if err := os.WriteFile(script, []byte("wrk.method = \"POST\"\nwrk.body = '{\"a\":1,\"b\":2}'\nwrk.headers[\"Content-Type\"] = \"application/json\"\n"), 0o600); err != nil {
		return err
	}
	defer os.Remove(script)

	fmt.Printf("# %d rounds, interleaved (the order alternating); wrk -t%d -c%d -d%v; rpcd serve %s\n\n",
		runs, wrkThreads, wrkConns, d, strings.Join(args[2:], " "))
	var all []shippedRun
	rps := map[string][]float64{}
	cpu := map[string][]float64{}
	ratioCPU, ratioRPS := []float64{}, []float64{}
	cpuRatios := map[string][]float64{} // by system, against net/http, round by round
	for r := 1; r <= runs; r++ {
		order := systems
		if r%2 == 0 {
			order = slices.Clone(systems)
			slices.Reverse(order)
		}
		got := map[string]shippedRun{}
		for _, c := range order {
			before, err := cputime.Process(c.cmd.Process.Pid)
			if err != nil {
				return err
			}
			n, secs, err := runWrk(wrk, script, c.url, wrkThreads, wrkConns, d)
			if err != nil {
				return fmt.Errorf("%s: %v", c.name, err)
			}
			after, err := cputime.Process(c.cmd.Process.Pid)
			if err != nil {
				return err
			}
			run := shippedRun{Round: r, System: c.name, Requests: n, Seconds: secs, PerSec: float64(n) / secs,
				CPUPerReqUS: float64((after - before).Microseconds()) / float64(n)}
			all = append(all, run)
			got[c.name] = run
			rps[c.name] = append(rps[c.name], run.PerSec)
			cpu[c.name] = append(cpu[c.name], run.CPUPerReqUS)
			fmt.Fprintf(os.Stderr, "round %d %-22s %9.0f req/s %6.2f µs CPU/req\n", r, c.name, run.PerSec, run.CPUPerReqUS)
		}
		ratioCPU = append(ratioCPU, got[gw.name].CPUPerReqUS/got[direct.name].CPUPerReqUS)
		ratioRPS = append(ratioRPS, got[gw.name].PerSec/got[direct.name].PerSec)
		for _, c := range systems {
			cpuRatios[c.name] = append(cpuRatios[c.name], got[c.name].CPUPerReqUS/got[direct.name].CPUPerReqUS)
		}
	}
	fmt.Println("| POST /rpc/Math/Sum, its own process | requests/s (median) | server CPU µs/request (median) | runs, requests/s | runs, µs/request |")
	fmt.Println("| --- | ---: | ---: | --- | --- |")
	for _, c := range systems {
		fmt.Printf("| %s | %.0f | %.2f | %s | %s |\n", c.name, median(rps[c.name]), median(cpu[c.name]), list(rps[c.name], "%.0f"), list(cpu[c.name], "%.2f"))
	}
	fmt.Printf("\nrpcd against net/http, round by round: CPU per request %s (median %.3f×); requests/s %s (median %.3f×)\n",
		list(ratioCPU, "%.3f"), median(ratioCPU), list(ratioRPS, "%.3f"), median(ratioRPS))
	for _, c := range systems[1:] {
		if c != direct {
			fmt.Printf("%s against net/http: CPU per request %s (median %.3f×)\n", c.name, list(cpuRatios[c.name], "%.3f"), median(cpuRatios[c.name]))
		}
	}
	if jsonOut == "" {
		return nil
	}
	b, err := json.MarshalIndent(map[string]any{
		"command":                       "cd bench && go run ./gateway -shipped RPCD " + beforeFlag(before) + serverFlag(withServer) + fmt.Sprintf("-c %d -t %d -d %v -runs %d", wrkConns, wrkThreads, d, runs) + argsAfter(extra),
		"serve":                         strings.Join(args[1:], " "),
		"kind":                          "POST /rpc/Math/Sum {\"a\":1,\"b\":2} under wrk; each server a process of its own; CPU per request from /proc/PID/stat",
		"runs":                          all,
		"cpu_ratio_by_round":            ratioCPU,
		"rps_ratio_by_round":            ratioRPS,
		"cpu_ratio_median":              median(ratioCPU),
		"cpu_ratio_by_system_and_round": cpuRatios,
		"systems": map[string]string{
			"gateway on net/http":           "the gateway's handler (gateway.New over the built-in routes) on the same minimal http.Server as net/http's, a process of its own",
			"gateway on rpcd's http.Server": "the same, on an http.Server configured as rpcd serve's (read and idle timeouts, header limit, the connection cap's listener)",
			"rpcd serve -gateway, before":   "rpcd serve -gateway from the binary -before names: the commit before the change measured",
		},
		"rps_ratio_median":     median(ratioRPS),
		"rpcd_cpu_median_us":   median(cpu[gw.name]),
		"direct_cpu_median_us": median(cpu[direct.name]),
	}, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(jsonOut, append(b, '\n'), 0o644)
}

// beforeFlag, serverFlag and argsAfter are the parts of the command that
// -before, -daemon-server and rpcd serve's own flags add, for the JSON.
func beforeFlag(before string) string {
	if before == "" {
		return ""
	}
	return "-before RPCD_BEFORE "
}

func serverFlag(withServer bool) string {
	if !withServer {
		return ""
	}
	return "-daemon-server "
}

func argsAfter(extra []string) string {
	if len(extra) == 0 {
		return ""
	}
	return " -- " + strings.Join(extra, " ")
}
