package main

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rpcd/rpcd/internal/dnstest"
)

// TestProcessCall runs `rpcd call` and `rpcd routes` processes against one
// `rpcd serve` process.
func TestProcessCall(t *testing.T) {
	d := startServe(t, "-log-format", "json", "-loops", "2")
	a := d.addr

	tests := []struct {
		name       string
		stdin      string
		args       []string
		wantCode   int
		wantStdout string // exact
		wantStderr string // substring; "" means stderr must be empty
	}{
		{name: "sum", args: []string{"call", "-addr", a, "Math/Sum", `{"a":1,"b":2}`},
			wantStdout: "3\n"},
		{name: "sum with spaces", args: []string{"call", "-addr", a, "Math/Sum", "{ \"a\": 40,\n \"b\": 2 }"},
			wantStdout: "42\n"},
		{name: "arg from stdin", stdin: "{\"a\":2,\"b\":3}\n", args: []string{"call", "-addr", a, "Math/Sum", "-"},
			wantStdout: "5\n"},
		{name: "no arg", args: []string{"call", "-addr", a, "Bench/NoArg"},
			wantStdout: "42\n"},
		{name: "string reply", args: []string{"call", "-addr", a, "Bench/EchoString", `"hi there"`},
			wantStdout: "\"hi there\"\n"},
		{name: "meta", args: []string{"call", "-addr", a, "-meta", "trace-id=abc123", "-meta", "tenant=t1", "Sys/Ping"},
			wantStdout: "\"pong\"\n"},
		{name: "raw arg", args: []string{"call", "-raw", "-addr", a, "Bench/EchoPacket", "hello"},
			wantStdout: "hello"},
		{name: "raw from stdin", stdin: "bytes\x00\xff\nmore\n", args: []string{"call", "-raw", "-addr", a, "Bench/EchoPacket", "-"},
			wantStdout: "bytes\x00\xff\nmore\n"},
		{name: "raw no arg", args: []string{"call", "-raw", "-addr", a, "Bench/EchoPacket"},
			wantStdout: ""},
		{name: "unknown route", args: []string{"call", "-addr", a, "No/Such"},
			wantCode: 1, wantStderr: "rpcd: not found: no route No/Such"},
		{name: "bad argument", args: []string{"call", "-addr", a, "Math/Sum", `"seven"`},
			wantCode: 1, wantStderr: "rpcd: invalid argument: Math/Sum: argument: want an object, got a string at byte 1\n"},
		{name: "a string for a number", args: []string{"call", "-addr", a, "Math/Sum", `{"a":"x","b":2}`},
			wantCode: 1, wantStderr: "rpcd: invalid argument: Math/Sum: argument: field \"a\": want a number, got a string at byte 6\n"},
		{name: "json route called raw", args: []string{"call", "-raw", "-addr", a, "Math/Sum", `{"a":1,"b":2}`},
			wantCode: 1, wantStderr: "rpcd: invalid argument: "},
		{name: "invalid json", args: []string{"call", "-addr", a, "Math/Sum", `{"a":1,`},
			wantCode: exitUsage, wantStderr: "rpcd call: ARG: not valid JSON: it ends at byte 7, before the value is complete; use -raw to send bytes\n"},
		{name: "empty stdin is not json", args: []string{"call", "-addr", a, "Math/Sum", "-"},
			wantCode: exitUsage, wantStderr: "not valid JSON"},
		{name: "bad meta", args: []string{"call", "-addr", a, "-meta", "novalue", "Sys/Ping"},
			wantCode: exitUsage, wantStderr: "key=value"},
		{name: "missing route", args: []string{"call", "-addr", a},
			wantCode: exitUsage, wantStderr: "usage: rpcd call"},
		{name: "a service", args: []string{"call", "-addr", "static://" + a + "/svc", "Math/Sum", `{"a":1,"b":2}`},
			wantStdout: "3\n"},
		{name: "a service, raw", args: []string{"call", "-raw", "-addr", "static://" + a + "," + a + "/svc", "Bench/EchoPacket", "hi"},
			wantStdout: "hi"},
		{name: "a service, hashed", args: []string{"call", "-addr", "static://" + a + "," + a + "/svc", "-balance", "hash", "-hash-key", "user-1", "Math/Sum", `{"a":1,"b":2}`},
			wantStdout: "3\n"},
		{name: "a service, least in flight", args: []string{"call", "-addr", "static://" + a + "/svc", "-balance", "least-inflight", "Sys/Ping"},
			wantStdout: "\"pong\"\n"},
		{name: "health", args: []string{"call", "-addr", a, "Sys/Health"},
			wantStdout: "\"SERVING\"\n"},
		{name: "unknown balance", args: []string{"call", "-addr", "static://" + a + "/svc", "-balance", "random", "Sys/Ping"},
			wantCode: exitUsage, wantStderr: `-balance is "random", want round-robin, least-inflight or hash`},
		{name: "balance without a service", args: []string{"call", "-addr", a, "-balance", "hash", "Sys/Ping"},
			wantCode: exitUsage, wantStderr: "-balance and -hash-key go with a service -addr"},
		{name: "hash key without hash", args: []string{"call", "-addr", "static://" + a + "/svc", "-hash-key", "k", "Sys/Ping"},
			wantCode: exitUsage, wantStderr: "-hash-key goes with -balance hash"},
		{name: "compressed", stdin: strings.Repeat("compressible text, ", 1000), args: []string{"call", "-compress", "zstd", "-raw", "-addr", a, "Bench/EchoPacket", "-"},
			wantStdout: strings.Repeat("compressible text, ", 1000)},
		{name: "unknown compression", args: []string{"call", "-compress", "lz4", "-addr", a, "Sys/Ping"},
			wantCode: exitUsage, wantStderr: "-compress is \"lz4\", want zstd, gzip or none"},
		{name: "etcd flags without etcd", args: []string{"call", "-addr", a, "-etcd-tls", "Sys/Ping"},
			wantCode: exitUsage, wantStderr: "go with an etcd:// -addr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rpcd(t, tt.stdin, tt.args...)
			if r.code != tt.wantCode {
				t.Errorf("exit status %d, want %d; stderr:\n%s", r.code, tt.wantCode, r.stderr)
			}
			if r.stdout != tt.wantStdout {
				t.Errorf("stdout %q, want %q", r.stdout, tt.wantStdout)
			}
			if tt.wantStderr == "" && r.stderr != "" {
				t.Errorf("stderr %q, want none", r.stderr)
			}
			if !strings.Contains(r.stderr, tt.wantStderr) {
				t.Errorf("stderr %q, want it to contain %q", r.stderr, tt.wantStderr)
			}
		})
	}

	t.Run("routes", func(t *testing.T) {
		r := rpcd(t, "", "routes", "-addr", a)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("exit status %d, stderr %q", r.code, r.stderr)
		}
		got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		for _, want := range []string{"Bench/EchoPacket", "Bench/EchoString", "Bench/MultiArgs", "Bench/NoArg", "Math/Sum", "Sys/Health", "Sys/Ping", "Sys/Routes"} {
			if !slices.Contains(got, want) {
				t.Errorf("routes lack %s; got:\n%s", want, r.stdout)
			}
		}
		if !slices.IsSorted(got) {
			t.Errorf("routes not in the server's (sorted) order:\n%s", r.stdout)
		}
	})
}

// TestProcessServeSignals checks that serve drains and exits 0 on SIGTERM
// and SIGINT, with the default text log.
func TestProcessServeSignals(t *testing.T) {
	for _, sig := range []os.Signal{syscall.SIGTERM, os.Interrupt} {
		t.Run(sig.String(), func(t *testing.T) {
			d := startServe(t)
			if r := rpcd(t, "", "call", "-addr", d.addr, "Sys/Ping"); r.code != 0 || r.stdout != "\"pong\"\n" {
				t.Fatalf("call before the signal: exit status %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
			}
			if code := d.stop(t, sig); code != 0 {
				t.Errorf("exit status %d after %v, want 0; log:\n%s", code, sig, d.log.String())
			}
			log := d.log.String()
			for _, want := range []string{`msg="rpcd: serving"`, "GOMAXPROCS=", "routes=", `msg="rpcd: draining"`, `msg="rpcd: stopped"`} {
				if !strings.Contains(log, want) {
					t.Errorf("log lacks %s:\n%s", want, log)
				}
			}
		})
	}
}

// TestProcessServeUnderTimeout checks that `timeout 1 rpcd serve`, which
// sends SIGTERM to rpcd and then to its own process group, which rpcd is
// in, drains and exits 0: the repeat is not a second signal.
func TestProcessServeUnderTimeout(t *testing.T) {
	timeoutBin, err := exec.LookPath("timeout")
	if err != nil {
		t.Skip("no timeout(1) here")
	}
	cmd := exec.Command(timeoutBin, "1", rpcdBin, "serve", "-addr", "127.0.0.1:0")
	var log syncBuffer
	cmd.Stderr = &log
	cmd.WaitDelay = stopTimeout
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 124 {
		err = nil // timeout's own status when it had to signal: rpcd's is in the log
	}
	if err != nil {
		t.Fatalf("timeout 1 rpcd serve: %v; log:\n%s", err, log.String())
	}
	if s := log.String(); !strings.Contains(s, `msg="rpcd: stopped"`) || strings.Contains(s, "second signal") {
		t.Fatalf("timeout 1 rpcd serve did not drain and stop:\n%s", s)
	}
}

// TestProcessServePortTaken checks that serve exits 1 when its address is
// in use.
func TestProcessServePortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r := rpcd(t, "", "serve", "-addr", ln.Addr().String())
	if r.code != 1 {
		t.Errorf("exit status %d, want 1; stderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "rpcd: cannot listen") || !strings.Contains(r.stderr, ln.Addr().String()) {
		t.Errorf("stderr does not say it cannot listen on %s:\n%s", ln.Addr(), r.stderr)
	}
}

// TestProcessCallNoServer checks that a call with no server to answer exits
// 1 with a message naming the address.
func TestProcessCallNoServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	for _, cmd := range []string{"call", "routes"} {
		args := []string{cmd, "-addr", addr, "-timeout", "2s"}
		if cmd == "call" {
			args = append(args, "Sys/Ping")
		}
		r := rpcd(t, "", args...)
		if r.code != 1 || r.stdout != "" {
			t.Errorf("%s: exit status %d, stdout %q; want 1 and none", cmd, r.code, r.stdout)
		}
		if !strings.Contains(r.stderr, "rpcd: unavailable: dial tcp "+addr+": connect: connection refused") {
			t.Errorf("%s: stderr %q does not name the failed dial", cmd, r.stderr)
		}
	}
}

// TestProcessCallNotRPCD: call and routes aimed at something that is not an
// rpcd server (an HTTP port, a TLS port, a port that says nothing) say so
// within about a second, not when -timeout has passed.
func TestProcessCallNotRPCD(t *testing.T) {
	httpSrv := httptest.NewServer(http.NotFoundHandler())
	defer httpSrv.Close()
	tlsSrv := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsSrv.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts (the kernel does), never answers
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	cases := []struct{ name, addr, want string }{
		{"HTTP", strings.TrimPrefix(httpSrv.URL, "http://"), " answered with bytes that are not rpcd frames (HTTP?)\n"},
		{"TLS", strings.TrimPrefix(tlsSrv.URL, "https://"), " closed the connection without answering an rpcd Ping: not an rpcd server, or one that wants TLS\n"},
		{"silent", silent.Addr().String(), " did not answer an rpcd Ping within 1s: is it an rpcd server?\n"},
	}
	for _, tc := range cases {
		for _, cmd := range []string{"call", "routes"} {
			t.Run(tc.name+"/"+cmd, func(t *testing.T) {
				args := []string{cmd, "-addr", tc.addr, "-timeout", "10s"}
				if cmd == "call" {
					args = append(args, "Math/Sum", `{"a":1,"b":2}`)
				}
				start := time.Now()
				r := rpcd(t, "", args...)
				took := time.Since(start)
				if want := "rpcd: unavailable: " + tc.addr + tc.want; r.code != 1 || r.stderr != want {
					t.Errorf("exit status %d, stderr %q; want 1 and %q", r.code, r.stderr, want)
				}
				if took > 3*time.Second { // a second's probe, and a process started on a busy machine
					t.Errorf("took %v against a -timeout of 10s", took)
				}
			})
		}
	}
}

// TestProcessHelp checks the help of the binary itself.
func TestProcessHelp(t *testing.T) {
	tests := []struct {
		args     []string
		wantCode int
		want     string // in stdout when 0, in stderr otherwise
	}{
		{[]string{"-h"}, 0, "commands:"},
		{[]string{"help"}, 0, "commands:"},
		{[]string{"help", "call"}, 0, "usage: rpcd call [flags] ROUTE [ARG]"},
		{[]string{"serve", "-h"}, 0, "usage: rpcd serve [flags]"},
		{[]string{"call", "-h"}, 0, "example:\n  rpcd call Math/Sum"},
		{[]string{"routes", "-help"}, 0, "usage: rpcd routes [flags]"},
		{nil, exitUsage, "commands:"},
		{[]string{"frobnicate"}, exitUsage, `rpcd: unknown command "frobnicate"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(append([]string{"rpcd"}, tt.args...), " "), func(t *testing.T) {
			r := rpcd(t, "", tt.args...)
			if r.code != tt.wantCode {
				t.Errorf("exit status %d, want %d", r.code, tt.wantCode)
			}
			out := r.stdout
			if tt.wantCode != 0 {
				out = r.stderr
			}
			if !strings.Contains(out, tt.want) {
				t.Errorf("output lacks %q:\nstdout:\n%s\nstderr:\n%s", tt.want, r.stdout, r.stderr)
			}
		})
	}
}

// TestProcessCallCompressed: `rpcd call -compress` sends its payload
// compressed. The server's frame limit is 64 KiB, and the call's payload
// 200 KB of text: sent as it is, the frame would break the limit and the
// server would close the connection on it; compressed, it arrives, and is
// refused for what it expands to.
func TestProcessCallCompressed(t *testing.T) {
	d := startServe(t, "-max-frame", "65536")
	text := strings.Repeat("compressible text, ", 11000)[:200000]
	r := rpcd(t, text, "call", "-compress", "gzip", "-max-frame", "1000000", "-raw", "-addr", d.addr, "Bench/EchoPacket", "-")
	if r.code != 1 || r.stderr != "rpcd: resource exhausted: compressed payload expands past the limit\n" {
		t.Errorf("a call that expands past the server's limit: exit %d, stderr %q", r.code, r.stderr)
	}
	r = rpcd(t, text[:60000], "call", "-compress", "gzip", "-raw", "-addr", d.addr, "Bench/EchoPacket", "-")
	if r.code != 0 || r.stdout != text[:60000] {
		t.Errorf("a call within it: exit %d, %d bytes out, stderr %q", r.code, len(r.stdout), r.stderr)
	}
}

// TestProcessDNSTarget: `rpcd call` and `rpcd bench` reach a service a
// DNS name lists (dns://SERVER/HOST:PORT, its A records).
func TestProcessDNSTarget(t *testing.T) {
	d := startServe(t)
	_, port, _ := net.SplitHostPort(d.addr)
	z := dnstest.Start(t)
	z.SetA("sum.test.", "127.0.0.1")
	target := "dns://" + z.Addr() + "/sum.test:" + port
	for _, addr := range []string{target, target + "?refresh=5s"} {
		if r := rpcd(t, "", "call", "-addr", addr, "Math/Sum", `{"a":1,"b":2}`); r.code != 0 || r.stdout != "3\n" {
			t.Errorf("call through %s: exit %d, stdout %q, stderr %q", addr, r.code, r.stdout, r.stderr)
		}
	}
	r := rpcd(t, "", "bench", "-addr", target, "-n", "50", "-warmup", "0", "-json")
	if r.code != 0 {
		t.Fatalf("bench through dns: exit %d, stderr %q", r.code, r.stderr)
	}
	if res := decodeBench(t, []byte(r.stdout)); res["calls"] != 50.0 || res["errors"] != 0.0 {
		t.Errorf("bench through dns: %v calls, %v errors; want 50 and 0", res["calls"], res["errors"])
	}
	if r := rpcd(t, "", "call", "-addr", "dns://"+z.Addr()+"/none.test:"+port, "-timeout", "1s", "Sys/Ping"); r.code == 0 {
		t.Errorf("call to a name with no records succeeded: %q", r.stdout)
	}
}
