package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/ws"
)

// gatewayAddr returns the address in serve's "rpcd: gateway serving" line
// (JSON log).
func gatewayAddr(t *testing.T, log string) string {
	t.Helper()
	for _, line := range strings.Split(log, "\n") {
		var rec struct{ Msg, Gateway string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "rpcd: gateway serving" {
			return rec.Gateway
		}
	}
	t.Fatalf("no gateway line in the log:\n%s", log)
	return ""
}

// TestProcessGatewaySecurity runs `rpcd serve -gateway` with tokens and a
// role requirement, then with mutual TLS: the gateway requires what the
// main port requires, through the same authenticator and middleware.
func TestProcessGatewaySecurity(t *testing.T) {
	files := writeTestFiles(t)

	t.Run("tokens", func(t *testing.T) {
		d := startServe(t, "-log-format", "json", "-gateway", "127.0.0.1:0",
			"-auth-tokens", files.tokens, "-auth-require", "Math/Sum=admin")
		url := "http://" + gatewayAddr(t, d.log.String()) + "/rpc/"
		hc := &http.Client{Timeout: runTimeout, Transport: &http.Transport{}}
		defer hc.CloseIdleConnections()
		cases := []struct {
			name, route, token string
			status             int
		}{
			{"no token", "Sys/Ping", "", 401},
			{"wrong token", "Sys/Ping", "t-nobody", 401},
			{"reader", "Sys/Ping", "t-reader", 200},
			{"reader without the role", "Math/Sum", "t-reader", 403},
			{"admin", "Math/Sum", "t-admin", 200},
		}
		for _, tc := range cases {
			req, _ := http.NewRequest(http.MethodPost, url+tc.route, strings.NewReader(`{"a":1,"b":2}`))
			req.Header.Set("Content-Type", "application/json")
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("%s: %d %s, want %d", tc.name, resp.StatusCode, body, tc.status)
			}
		}
		if code := d.stop(t, syscall.SIGTERM); code != 0 {
			t.Errorf("exit status %d; log:\n%s", code, d.log.String())
		}
	})

	t.Run("mutual TLS", func(t *testing.T) {
		d := startServe(t, "-log-format", "json", "-gateway", "127.0.0.1:0",
			"-tls-cert", files.serverCert, "-tls-key", files.serverKey, "-tls-client-ca", files.ca)
		url := "https://" + gatewayAddr(t, d.log.String()) + "/rpc/Sys/Ping"
		caPEM, err := os.ReadFile(files.ca)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		post := func(certs []tls.Certificate) (int, error) {
			tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Timeout: runTimeout, Transport: tr}
			resp, err := hc.Post(url, "application/json", strings.NewReader("{}"))
			if err != nil {
				return 0, err
			}
			resp.Body.Close()
			return resp.StatusCode, nil
		}
		if status, err := post(nil); err == nil {
			t.Errorf("without a client certificate: status %d, want the handshake refused", status)
		}
		cert, err := tls.LoadX509KeyPair(files.clientCert, files.clientKey)
		if err != nil {
			t.Fatal(err)
		}
		if status, err := post([]tls.Certificate{cert}); err != nil || status != 200 {
			t.Errorf("with a client certificate: %d, %v", status, err)
		}
		d.stop(t, syscall.SIGTERM)
	})
}

// TestServeGatewayDrain checks that SIGTERM lets a gateway call in flight
// finish with its reply before serve exits 0.
func TestServeGatewayDrain(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	p := serveInProcessWith(t, func(reg *handler.Registry) {
		reg.Handle("Test/Hold", handler.Func(func(context.Context, struct{}) (string, error) {
			entered <- struct{}{}
			<-release
			return "done", nil
		}), handler.Blocking())
	}, "-gateway", "127.0.0.1:0", "-loops", "1")
	log := p.log
	url := "http://" + gatewayAddr(t, log.String()) + "/rpc/Test/Hold"
	hc := &http.Client{Timeout: runTimeout, Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	type result struct {
		status int
		body   string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := hc.Post(url, "application/json", strings.NewReader("{}"))
		if err != nil {
			done <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- result{status: resp.StatusCode, body: string(b)}
	}()
	select {
	case <-entered:
	case <-time.After(stopTimeout):
		t.Fatal("the gateway call did not start")
	}
	p.sigs <- syscall.SIGTERM
	if err := waitLog(log, "rpcd: draining"); err != nil {
		t.Fatal(err)
	}
	close(release)
	r := <-done
	if r.err != nil || r.status != 200 || r.body != `"done"` {
		t.Errorf("the call in flight during the drain: %d %q %v, want 200 \"done\"", r.status, r.body, r.err)
	}
	if st := p.wait(t, stopTimeout); st != 0 || !strings.Contains(log.String(), "rpcd: stopped") {
		t.Errorf("exit status %d, want 0; log:\n%s", st, log.String())
	}
}

// TestServeLoopsLeaveAPToTheGateway: without -loops, serve runs an event
// loop per P when it serves rpcd alone, and one fewer (at least one) with
// the gateway, whose connections wait in Go's network poller (defaultLoops).
func TestServeLoopsLeaveAPToTheGateway(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	for _, tc := range []struct {
		args  []string
		loops int
	}{
		{nil, procs},
		{[]string{"-gateway", "127.0.0.1:0"}, max(1, procs-1)},
		{[]string{"-gateway", "127.0.0.1:0", "-loops", "3"}, 3},
	} {
		p := serveInProcessWith(t, nil, tc.args...)
		if want := fmt.Sprintf(`"loops":%d,`, tc.loops); !strings.Contains(p.log.String(), want) {
			t.Errorf("serve %v with GOMAXPROCS %d: the log lacks %s:\n%s", tc.args, procs, want, p.log.String())
		}
		if st := p.stop(t); st != 0 {
			t.Errorf("serve %v: exit status %d, want 0", tc.args, st)
		}
	}
}

// TestServeGatewayMaxConns: past -gateway-max-conns, a new gateway
// connection is not served until one of those open closes; the flag is
// refused without -gateway or below 0.
func TestServeGatewayMaxConns(t *testing.T) {
	p := serveInProcessWith(t, nil, "-loops", "1", "-gateway", "127.0.0.1:0", "-gateway-max-conns", "2")
	log := p.log
	addr := gatewayAddr(t, log.String())
	const req = "POST /rpc/Math/Sum HTTP/1.1\r\nHost: rpcd\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{\"a\":1,\"b\":2}"
	// sum sends a request on nc and reads the reply within wait.
	sum := func(nc net.Conn, br *bufio.Reader, wait time.Duration) error {
		nc.SetDeadline(time.Now().Add(wait))
		if _, err := io.WriteString(nc, req); err != nil {
			return err
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != "3" {
			return fmt.Errorf("%s %q", resp.Status, body)
		}
		return nil
	}
	var conns []net.Conn
	var readers []*bufio.Reader
	for i := range 3 {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		conns, readers = append(conns, nc), append(readers, bufio.NewReader(nc))
		err = sum(nc, readers[i], 300*time.Millisecond)
		switch {
		case i < 2 && err != nil:
			t.Fatalf("connection %d, under the cap: %v", i, err)
		case i == 2 && err == nil:
			t.Fatal("a third connection was served past -gateway-max-conns 2")
		}
	}
	conns[0].Close()
	// The third connection's request, sent already, is answered once
	// the first connection's slot is free.
	conns[2].SetDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(readers[2], nil)
	if err != nil {
		t.Fatalf("the third connection after one closed: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the third connection after one closed: %s", resp.Status)
	}
	if st := p.stop(t); st != 0 {
		t.Errorf("exit status %d, want 0", st)
	}

	for _, args := range [][]string{{"-gateway-max-conns", "5"}, {"-gateway", "127.0.0.1:0", "-gateway-max-conns", "-1"}} {
		if r := rpcd(t, "", append([]string{"serve", "-addr", "127.0.0.1:0"}, args...)...); r.code != exitUsage || !strings.Contains(r.stderr, "-gateway-max-conns") {
			t.Errorf("serve %q: exit %d, %s", args, r.code, r.stderr)
		}
	}
}

// TestServeGatewayCompression: `rpcd serve -gateway` answers a client
// whose Accept-Encoding takes gzip with a gzipped reply, and
// `-compress-min -1` turns that off on the gateway as on the main port.
func TestServeGatewayCompression(t *testing.T) {
	for _, tc := range []struct {
		flags    []string
		encoding string
	}{
		{nil, "gzip"},
		{[]string{"-compress-min", "-1"}, ""},
	} {
		d := startServe(t, append([]string{"-log-format", "json", "-gateway", "127.0.0.1:0"}, tc.flags...)...)
		url := "http://" + gatewayAddr(t, d.log.String()) + "/rpc/Bench/EchoString"
		hc := &http.Client{Timeout: runTimeout, Transport: &http.Transport{DisableCompression: true}}
		doc := `"` + strings.Repeat("compress me ", 300) + `"`
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(doc))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		hc.CloseIdleConnections()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != tc.encoding {
			t.Fatalf("%q: %d, Content-Encoding %q, want %q", tc.flags, resp.StatusCode, resp.Header.Get("Content-Encoding"), tc.encoding)
		}
		if tc.encoding == "" && string(body) != doc || tc.encoding != "" && len(body) >= len(doc)/4 {
			t.Fatalf("%q: a %d-byte reply to a %d-byte echo", tc.flags, len(body), len(doc))
		}
		if code := d.stop(t, syscall.SIGTERM); code != 0 {
			t.Errorf("exit status %d; log:\n%s", code, d.log.String())
		}
	}
}

// TestProcessWebSocket checks that `rpcd serve -gateway` takes rpcd over
// WebSocket at /ws on the gateway's listener, with the main port's
// authentication: a client with the token is served, as an identity;
// one without gets the GoAway of a connection that has not
// authenticated.
func TestProcessWebSocket(t *testing.T) {
	files := writeTestFiles(t)
	d := startServe(t, "-log-format", "json", "-gateway", "127.0.0.1:0", "-auth-tokens", files.tokens, "-auth-require", "Math/Sum=admin")
	url := "ws://" + gatewayAddr(t, d.log.String()) + ws.Path
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	dialWS := func(ctx context.Context, _ string) (net.Conn, error) { return ws.Dial(ctx, url, nil) }
	c, err := client.Dial(ctx, "ws", client.Options{Dial: dialWS, Credentials: &client.Credentials{Method: "token", Secret: []byte("t-admin")}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var sum int64
	if err := c.Call(ctx, builtin.Sum, builtin.SumArgs{A: 1, B: 2}, &sum); err != nil || sum != 3 {
		t.Fatalf("Math/Sum over WebSocket as admin: %d, %v", sum, err)
	}
	if _, err := client.Dial(ctx, "ws", client.Options{Dial: dialWS, Credentials: &client.Credentials{Method: "token", Secret: []byte("t-nobody")}, MaxRetries: -1}); handler.CodeOf(err) != proto.CodeUnauthenticated {
		t.Fatalf("a wrong token over WebSocket: %v, want Unauthenticated", err)
	}
}

// TestProcessJSONRPC checks that `rpcd serve -gateway` answers JSON-RPC
// 2.0 at /jsonrpc, a batch included, with curl as the tool.
func TestProcessJSONRPC(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl here")
	}
	d := startServe(t, "-log-format", "json", "-gateway", "127.0.0.1:0")
	url := "http://" + gatewayAddr(t, d.log.String()) + "/jsonrpc"
	batch := `[{"jsonrpc":"2.0","method":"Math/Sum","params":{"a":1,"b":2},"id":1},{"jsonrpc":"2.0","method":"No/Such","id":2}]`
	out, err := exec.Command(curl, "-sS", "-H", "Content-Type: application/json", "--data", batch, url).Output()
	if err != nil {
		t.Fatalf("curl: %v", err)
	}
	want := `[{"jsonrpc":"2.0","result":3,"id":1},{"jsonrpc":"2.0","error":{"code":-32601,"message":"no route No/Such","data":{"code":5,"name":"NotFound","unprocessed":true}},"id":2}]` + "\n"
	if string(out) != want {
		t.Fatalf("curl got %s\nwant %s", out, want)
	}
}
