package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// fakePeer listens on loopback and runs serve on each connection it
// accepts, closing the connection after; it stops with the test.
func fakePeer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				serve(nc)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

// readThen reads what the client sends, then writes answer (if any) and
// holds the connection open for hold.
func readThen(answer string, hold time.Duration) func(net.Conn) {
	return func(nc net.Conn) {
		buf := make([]byte, 512)
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := nc.Read(buf); err != nil {
			return
		}
		if answer != "" {
			_, _ = nc.Write([]byte(answer))
		}
		time.Sleep(hold)
	}
}

// TestProbe: with ProbeTimeout, Dial tells what a peer that is not an rpcd
// server did, well within a second, instead of leaving calls to wait for
// their deadline; an rpcd server passes, and its refusal is its own.
func TestProbe(t *testing.T) {
	httpSrv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(httpSrv.Close)
	tlsSrv := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(tlsSrv.Close)

	cases := []struct {
		name, addr, want string
		code             proto.Code
	}{
		{"an HTTP server", strings.TrimPrefix(httpSrv.URL, "http://"), " answered with bytes that are not rpcd frames (HTTP?)", proto.CodeUnavailable},
		{"a TLS server that closes", strings.TrimPrefix(tlsSrv.URL, "https://"), " closed the connection without answering an rpcd Ping: not an rpcd server, or one that wants TLS", proto.CodeUnavailable},
		{"a TLS server that alerts", fakePeer(t, readThen("\x15\x03\x03\x00\x02\x02\x46", time.Second)), " answered with bytes that are not rpcd frames (TLS?)", proto.CodeUnavailable},
		{"a peer that says nothing", fakePeer(t, readThen("", 2*time.Second)), " did not answer an rpcd Ping within 300ms: is it an rpcd server?", proto.CodeUnavailable},
		{"a peer that hangs up", fakePeer(t, readThen("", 0)), " closed the connection without answering an rpcd Ping", proto.CodeUnavailable},
		{"another version", fakePeer(t, readThen("RD\x02"+strings.Repeat("\x00", 21), time.Second)), " speaks rpcd protocol version 2, not 1", proto.CodeUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			c, err := client.Dial(ctx, tc.addr, client.Options{ProbeTimeout: 300 * time.Millisecond, MaxRetries: -1})
			took := time.Since(start)
			if err == nil {
				c.Close()
				t.Fatal("Dial succeeded")
			}
			var e *handler.Error
			if !errors.As(err, &e) || e.Code != tc.code || !strings.HasPrefix(e.Message, tc.addr+tc.want) {
				t.Errorf("Dial: %v, want %v %q", err, tc.code, tc.addr+tc.want)
			}
			if took > time.Second {
				t.Errorf("Dial took %v, want under a second", took)
			}
		})
	}

	t.Run("an rpcd server", func(t *testing.T) {
		s := server(t, "127.0.0.1:0")
		c := dial(t, s.Addr().String(), client.Options{ProbeTimeout: 300 * time.Millisecond, Credentials: &client.Credentials{Secret: []byte("x")}})
		var pong string
		if err := c.Call(context.Background(), "Sys/Ping", nil, &pong); err != nil || pong != "pong" {
			t.Fatalf("Sys/Ping after the probe and a Hello: %q, %v", pong, err)
		}
	})

	t.Run("an rpcd server that is full", func(t *testing.T) {
		reg := handler.NewRegistry()
		s := reactor.New(reg, reactor.Options{MaxConns: 1})
		if err := s.Start("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stop(t, s) })
		dial(t, s.Addr().String(), client.Options{ProbeTimeout: time.Second}) // the one connection
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := client.Dial(ctx, s.Addr().String(), client.Options{ProbeTimeout: time.Second})
		if err == nil {
			c.Close()
			t.Fatal("Dial to a full server succeeded")
		}
		if !errors.Is(err, handler.ErrResourceExhausted) || !strings.Contains(err.Error(), " refused the connection: ") {
			t.Errorf("Dial to a full server: %v, want its GoAway's ResourceExhausted", err)
		}
	})
}

// TestNotRPCDAnswer: without a probe, a call whose connection brings back
// bytes that are not rpcd frames fails at once, saying so.
func TestNotRPCDAnswer(t *testing.T) {
	addr := fakePeer(t, readThen("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n", time.Second))
	c := dial(t, addr, client.Options{MaxRetries: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	err := c.Call(ctx, "Sys/Ping", nil, nil)
	if !errors.Is(err, handler.ErrUnavailable) || !strings.Contains(err.Error(), addr+" answered with bytes that are not rpcd frames (HTTP?)") {
		t.Errorf("call: %v, want Unavailable naming HTTP", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the call took %v", took)
	}
}
