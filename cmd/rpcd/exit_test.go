package main

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler/builtin"
)

// TestProcessExitStatuses runs `rpcd serve` with a mistake of each kind an
// operator made: each exits 78 before serving, with a message naming the
// flag (and the file's line, when the file gave it). A failure of the
// environment, an address another process holds, exits 1: a restart may
// serve. (A Go panic exits 2: TestMemoryDenyWriteExecute sees one.)
func TestProcessExitStatuses(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	noPort := writeConfig(t, "addr: 127.0.0.1\n")

	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string // in stderr
	}{
		{"a flag that is none", []string{"serve", "-port", "7070"}, exitUsage,
			[]string{"rpcd serve: flag provided but not defined: -port", "usage: rpcd serve"}},
		{"an address without a port, in the file", []string{"serve", "-config", noPort}, exitUsage,
			[]string{`rpcd serve: -addr is "127.0.0.1", want host:port (port 0 picks one) or unix:///path (-addr from ` + noPort + ":1)"}},
		{"-admin nonsense", []string{"serve", "-addr", "127.0.0.1:0", "-admin", "nonsense"}, exitUsage,
			[]string{`rpcd serve: -admin is "nonsense", want host:port`}},
		{"a port that is none", []string{"serve", "-addr", "127.0.0.1:0", "-gateway", "127.0.0.1:http-ish"}, exitUsage,
			[]string{`rpcd serve: -gateway is "127.0.0.1:http-ish": port "http-ish" is no number from 0 to 65535`}},
		{"a missing -tls-cert file", []string{"serve", "-addr", "127.0.0.1:0", "-tls-cert", missing + ".pem", "-tls-key", missing + ".key"}, exitUsage,
			[]string{"rpcd serve: -tls-cert: loading the TLS certificate: open " + missing + ".pem: no such file or directory"}},
		{"a missing -auth-tokens file", []string{"serve", "-addr", "127.0.0.1:0", "-auth-tokens", missing}, exitUsage,
			[]string{"rpcd serve: -auth-tokens: reading tokens: open " + missing + ": no such file or directory"}},
		{"a missing -auth-hmac-key file", []string{"serve", "-addr", "127.0.0.1:0", "-auth-hmac-key", missing}, exitUsage,
			[]string{"rpcd serve: -auth-hmac-key: reading the HMAC key: open " + missing}},
		{"a missing -etcd-cacert file", []string{"serve", "-addr", "127.0.0.1:0", "-etcd", "127.0.0.1:1", "-service", "s", "-etcd-cacert", missing}, exitUsage,
			[]string{"rpcd serve: -etcd-cacert: "}},
		{"-etcd on every interface without -advertise", []string{"serve", "-addr", "0.0.0.0:0", "-etcd", "127.0.0.1:1", "-service", "s"}, exitUsage,
			[]string{"rpcd serve: -addr is 0.0.0.0:0, which clients cannot dial: give -advertise"}},
		{"an address another process holds", []string{"serve", "-addr", taken.Addr().String()}, exitFail,
			[]string{"rpcd: cannot listen"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rpcd(t, "", tc.args...)
			if r.code != tc.code {
				t.Errorf("exit status %d, want %d; stderr:\n%s", r.code, tc.code, r.stderr)
			}
			for _, want := range tc.want {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
				}
			}
			if tc.code == exitUsage && strings.Contains(r.stderr, "rpcd: serving") {
				t.Errorf("a mistake found after serving:\n%s", r.stderr)
			}
		})
	}
}

// TestProcessExitWhileServing: a failure while serving, a drain that
// outlasts -drain-timeout (a stream that never ends), exits 1.
func TestProcessExitWhileServing(t *testing.T) {
	d := startServe(t, "-drain-timeout", "200ms")
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	c, err := client.Dial(ctx, d.addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.OpenStream(ctx, builtin.StreamSink)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("never closed")); err != nil {
		t.Fatal(err)
	}
	if code := d.stop(t, syscall.SIGTERM); code != exitFail {
		t.Errorf("exit status %d, want %d; log:\n%s", code, exitFail, d.log.String())
	}
	if !strings.Contains(d.log.String(), "rpcd: drain timed out") {
		t.Errorf("the log does not say the drain timed out:\n%s", d.log.String())
	}
}
