package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
)

// prefixes finds the "rpcd: " or "rpcd COMMAND: " that begins an error.
var prefixes = regexp.MustCompile(`\brpcd(?: [a-z]+)?: `)

// TestErrorPrefixOnce runs the commands into every error they can be led
// to here (bad flags and files, a server that refuses, that is not rpcd,
// that wants TLS or a token, routes that fail, a port that is taken), and
// checks that no line they print says "rpcd: " twice, as "rpcd: rpcd:" or
// "rpcd: unavailable: handshake: rpcd: ..." would.
func TestErrorPrefixOnce(t *testing.T) {
	f := writeTestFiles(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	badYAML := write("bad.yaml", "max-conns: many\n")
	badTokens := write("bad-tokens", "t-only-a-token\n")
	badKey := write("bad.key", "short\n")
	missing := filepath.Join(dir, "missing")

	plain := serveInProcessWith(t, func(reg *handler.Registry) {
		// What a handler built on other libraries returns: their errors,
		// prefixed as the style has them, and rpcd's own.
		reg.HandleFunc("Test/LibError", func(context.Context, []byte, []byte) ([]byte, error) {
			return nil, fmt.Errorf("rpcd: a library says no")
		})
		reg.HandleFunc("Test/Wrapped", func(context.Context, []byte, []byte) ([]byte, error) {
			return nil, fmt.Errorf("rpcd: doing it: %w", handler.Errorf(7, "not you"))
		})
		reg.HandleFunc("Test/Slow", func(ctx context.Context, _, reply []byte) ([]byte, error) {
			<-ctx.Done()
			return reply, ctx.Err()
		}, handler.Blocking())
	}, "-loops", "1")
	secure := serveInProcessWith(t, nil, "-tls-cert", f.serverCert, "-tls-key", f.serverKey,
		"-auth-tokens", f.tokens, "-auth-require", "Math/Sum=admin,Sys/Stats=admin", "-auth-topics", "pub:orders.>=admin;sub:orders.>=admin")
	httpSrv := httptest.NewServer(http.NotFoundHandler())
	defer httpSrv.Close()
	httpAddr := strings.TrimPrefix(httpSrv.URL, "http://")
	closed := closedAddr(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	a, s := plain.addr, secure.addr
	// with returns the command line cmd, the secured server's flags, more.
	with := func(cmd string, more ...string) []string {
		return append([]string{cmd, "-addr", s, "-tls-ca", f.ca}, more...)
	}
	runs := [][]string{
		// call and routes
		{"call", "-addr", closed, "Sys/Ping"},
		{"call", "-addr", httpAddr, "Sys/Ping"},
		{"routes", "-addr", httpAddr},
		{"call", "-addr", a, "No/Such"},
		{"call", "-addr", a, "Math/Sum", `{"a":"x"}`},
		{"call", "-addr", a, "Math/Sum", `{"a":9223372036854775807,"b":1}`},
		{"call", "-addr", a, "-raw", "Math/Sum", "x"},
		{"call", "-addr", a, "Math/Sum", `{"a":1,`},
		{"call", "-addr", a, "Test/LibError"},
		{"call", "-addr", a, "Test/Wrapped"},
		{"call", "-addr", a, "-timeout", "300ms", "Test/Slow"},
		{"call", "-addr", a, "-tls", "Sys/Ping"},
		{"call", "-addr", a, "-token-file", missing, "Sys/Ping"},
		{"call", "-addr", a, "-tls-ca", missing, "Sys/Ping"},
		{"call", "-addr", a, "-meta", "Bad Key=1", "Sys/Ping"},
		{"call", "-addr", "dns:///no-such-host.invalid:7070", "-timeout", "2s", "Sys/Ping"},
		{"call", "-addr", "static://" + closed + "/svc", "-timeout", "2s", "Sys/Ping"},
		{"call", "-addr", s, "Sys/Ping"},
		with("call", "Sys/Ping"),
		with("call", "-token", "t-wrong", "Sys/Ping"),
		with("call", "-token", "t-reader", "Math/Sum", `{"a":1,"b":2}`),
		with("call", "-token", "t-admin", "-tls-ca", f.otherCA, "Sys/Ping"),
		{"describe", "-addr", a, "No/Such"},
		{"describe", "-addr", httpAddr},
		with("describe", "-token", "t-wrong"),
		// publish and subscribe
		{"pub", "-addr", closed, "orders.x", "1"},
		{"pub", "-addr", a, "orders..x", "1"},
		{"sub", "-addr", closed, "orders.>"},
		with("pub", "-token", "t-reader", "orders.x", "1"),
		with("sub", "-token", "t-reader", "-n", "1", "orders.>"),
		// load commands
		{"bench", "-addr", closed, "-n", "10"},
		{"bench", "-addr", httpAddr, "-n", "10"},
		{"bench", "-addr", a, "-route", "Test/LibError", "-n", "5", "-warmup", "0"},
		{"bench", "-addr", closed, "-scenario", "StreamUpload", "-size", "10"},
		{"bench", "-addr", closed, "-scenario", "FanOut", "-subs", "1", "-d", "100ms"},
		{"bench", "-addr", a, "-route", "A/B", "-payload", missing},
		with("bench", "-token", "t-reader", "-scenario", "StreamUpload", "-size", "10"),      // Sys/Stats refused
		with("bench", "-token", "t-reader", "-scenario", "FanOut", "-subs", "1", "-d", "1s"), // subscription refused
		{"soak", "-addr", closed, "-c", "1", "-d", "100ms", "-every", "50ms"},
		with("soak", "-token", "t-reader", "-c", "1", "-d", "100ms", "-every", "50ms"), // Sys/Stats refused
		// token and serve
		{"token", "-key", missing, "-subject", "x"},
		{"token", "-key", badKey, "-subject", "x"},
		{"serve", "-addr", taken.Addr().String()},
		{"serve", "-addr", "127.0.0.1:0", "-config", badYAML},
		{"serve", "-addr", "127.0.0.1:0", "-auth-tokens", badTokens},
		{"serve", "-addr", "127.0.0.1:0", "-auth-tokens", missing},
		{"serve", "-addr", "127.0.0.1:0", "-tls-cert", missing, "-tls-key", missing},
		{"serve", "-addr", "127.0.0.1:0", "-auth-topics", "pub:a..b=*"},
	}
	for _, args := range runs {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out, errOut, code := runBounded(t, args)
			if code == 0 {
				t.Errorf("exit status 0; want an error to look at; stdout %q", out)
			}
			if errOut == "" {
				t.Errorf("exit status %d and nothing on standard error", code)
			}
			for _, line := range strings.Split(out+errOut, "\n") {
				if n := len(prefixes.FindAllString(line, -1)); n > 1 {
					t.Errorf("%d prefixes in %q", n, line)
				}
			}
		})
	}
}

// runBounded runs the command line in this process, with no signal to
// stop it but the test's, and returns what it printed.
func runBounded(t *testing.T, args []string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e syncBuffer
	sigs := make(chan os.Signal, 1)
	c := &cli{stdin: strings.NewReader(""), stdout: &o, stderr: &e,
		signals: func() (<-chan os.Signal, func()) { return sigs, func() {} }}
	done := make(chan int, 1)
	go func() { done <- c.run(args) }()
	select {
	case code = <-done:
	case <-time.After(runTimeout):
		sigs <- syscall.SIGTERM // serve, sub: stop them
		select {
		case code = <-done:
			t.Errorf("still running after %v; stopped", runTimeout)
		case <-time.After(stopTimeout):
			t.Fatalf("still running %v after SIGTERM", stopTimeout)
		}
	}
	return o.String(), e.String(), code
}
