package record

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/servertest"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// startProxy serves a proxy to the server at to, recording into rec, on a
// loopback port; the test closes it when it ends.
func startProxy(t *testing.T, to string, rec *Recorder) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(to, rec)
	served := make(chan error, 1)
	go func() { served <- p.Serve(ln) }()
	t.Cleanup(func() {
		p.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// TestProxyReactor: calls through the proxy to a real server are answered
// as without it, and the recording holds them, their answers, and a
// compressed payload expanded.
func TestProxyReactor(t *testing.T) {
	reg := handler.NewRegistry()
	builtin.Register(reg)
	srv := servertest.Start(t, reg, reactor.Options{Loops: 1})
	var file bytes.Buffer
	r, err := New(&file, Options{Answers: true, Source: "proxy", Server: srv.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	addr := startProxy(t, srv.Addr().String(), r)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.Options{Compression: proto.CompressionGzip})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		var sum int
		if err := c.Call(ctx, builtin.Sum, map[string]int{"a": i, "b": 2}, &sum); err != nil || sum != i+2 {
			t.Fatalf("Math/Sum through the proxy: %d, %v", sum, err)
		}
	}
	big := bytes.Repeat([]byte("compressible "), 1000)
	if reply, err := c.CallRaw(ctx, builtin.EchoPacket, big, nil); err != nil || !bytes.Equal(reply, big) {
		t.Fatalf("EchoPacket through the proxy: %d bytes, %v", len(reply), err)
	}
	c.Close()
	// The client's close reaches the recorder through the proxy; wait for
	// its close record (bounded), then stop.
	for i := 0; i < 1000 && r.Stats().Frames < 12; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	s, err := r.Stop()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := entries(t, file.Bytes())
	var sums, answers int
	var echo *rec
	for i, e := range got {
		switch {
		case e.typ == EntryFrame && e.route == builtin.Sum:
			sums++
		case e.typ == EntryFrame && e.out && e.kind == proto.KindResponse:
			answers++
		}
		if e.route == builtin.EchoPacket {
			echo = &got[i]
		}
	}
	if sums != 5 || answers != 6 || s.Calls != 6 || s.Conns != 1 {
		t.Errorf("recorded %d Math/Sum calls and %d answers, stats %+v; want 5 and 6", sums, answers, s)
	}
	if echo == nil || echo.payload != string(big) || echo.flags != 0 || echo.n != len(big) {
		t.Errorf("the compressed EchoPacket was not recorded expanded: %+v", echo)
	}
	if got[0].typ != EntryOpen || got[len(got)-1].typ != EntryClose {
		t.Errorf("the connection's records do not open and close it: %v ... %v", got[0].typ, got[len(got)-1].typ)
	}
}

// TestProxyBytesUnchanged: the proxy passes every byte both ways as it
// came, garbage included; bytes that do not parse end the connection's
// recording, not its traffic.
func TestProxyBytesUnchanged(t *testing.T) {
	// An echo server that keeps what it read.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	received := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			received <- nil
			return
		}
		defer c.Close()
		var all bytes.Buffer
		io.Copy(io.MultiWriter(&all, c), c)
		received <- all.Bytes()
	}()
	var file bytes.Buffer
	rec, err := New(&file, Options{})
	if err != nil {
		t.Fatal(err)
	}
	addr := startProxy(t, ln.Addr().String(), rec)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	sent := append(request(1, "A/B", "one"), request(2, "A/B", "two")[:10]...) // the second in two pieces
	var echoed bytes.Buffer
	send := func(b []byte) {
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(b))
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		echoed.Write(buf)
	}
	send(sent)
	rest := append(request(2, "A/B", "two")[10:], []byte("garbage, not a frame\x00\x01")...)
	rest = append(rest, request(3, "A/B", "after the garbage")...)
	send(rest)
	sent = append(sent, rest...)
	c.(*net.TCPConn).CloseWrite()
	if got := <-received; !bytes.Equal(got, sent) {
		t.Errorf("the server read\n%q\nthe client sent\n%q", got, sent)
	}
	if !bytes.Equal(echoed.Bytes(), sent) {
		t.Errorf("the client read back\n%q\nwant\n%q", echoed.Bytes(), sent)
	}
	for i := 0; i < 1000 && rec.Stats().Frames < 2; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	rec.Stop()
	got, _ := entries(t, file.Bytes())
	var lines []string
	for _, e := range got {
		lines = append(lines, e.typ.String()+" "+e.payload)
	}
	if want := "open |frame one|frame two|close "; strings.Join(lines, "|") != want {
		t.Errorf("recorded %q, want %q", strings.Join(lines, "|"), want)
	}
}

// TestRunProxy: RunProxy records into a new file until its context ends.
func TestRunProxy(t *testing.T) {
	reg := handler.NewRegistry()
	builtin.Register(reg)
	srv := servertest.Start(t, reg, reactor.Options{Loops: 1})
	path := filepath.Join(t.TempDir(), "p.rec")
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan net.Addr, 1)
	done := make(chan error, 1)
	var s Stats
	go func() {
		var err error
		s, err = RunProxy(ctx, "127.0.0.1:0", srv.Addr().String(), path, Options{}, func(a net.Addr) { addrs <- a })
		done <- err
	}()
	addr := (<-addrs).String()
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	c, err := client.Dial(cctx, addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CallRaw(cctx, builtin.NoArg, nil, nil); err != nil {
		t.Fatal(err)
	}
	c.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s.Conns != 1 || s.Ended != EndStopped {
		t.Errorf("stats %+v", s)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if h := r.Header(); h.Source != "proxy" || h.Server != srv.Addr().String() {
		t.Errorf("header %+v", h)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode().Perm())
	}
}
