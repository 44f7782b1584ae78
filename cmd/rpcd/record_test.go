package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRecordProxyInspectFilter: rpcd record through a proxy to a serve in
// this process, then -inspect and -filter of what it wrote.
func TestRecordProxyInspectFilter(t *testing.T) {
	srv := serveInProcess(t, nil)
	dir := t.TempDir()
	file := filepath.Join(dir, "traffic.rec")
	sigs := make(chan os.Signal, 1)
	var stdout bytes.Buffer
	stderr := &syncBuffer{}
	c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: stderr,
		signals: func() (<-chan os.Signal, func()) { return sigs, func() {} }}
	code := make(chan int, 1)
	go func() {
		code <- c.run([]string{"record", "-listen", "127.0.0.1:0", "-to", srv.addr, "-o", file, "-answers", "-redact", "Bench/*=drop"})
	}()
	through := regexp.MustCompile(`through (\S+) into`)
	var addr string
	for i := 0; i < 2000 && addr == ""; i++ {
		if m := through.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
		} else {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if addr == "" {
		t.Fatalf("rpcd record said no address: %q", stderr.String())
	}
	for range 3 {
		if out, errs, code := callInProcess("call", "-addr", addr, "Math/Sum", `{"a":1,"b":2}`); code != 0 || strings.TrimSpace(out) != "3" {
			t.Fatalf("call through the proxy: %q %q, exit %d", out, errs, code)
		}
	}
	callInProcess("call", "-addr", addr, "Bench/EchoPacket", `"secret"`)
	sigs <- syscall.SIGINT
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("rpcd record exited %d: %s", c, stderr.String())
		}
	case <-time.After(stopTimeout):
		t.Fatal("rpcd record did not stop on SIGINT")
	}
	if !strings.Contains(stdout.String(), "4 calls") || !strings.Contains(stdout.String(), "ended: stopped") {
		t.Errorf("rpcd record printed %q", stdout.String())
	}
	if b, _ := os.ReadFile(file); bytes.Contains(b, []byte("secret")) {
		t.Error("a dropped payload reached the file")
	}

	out, errs, code2 := callInProcess("record", "-inspect", file)
	if code2 != 0 || !strings.Contains(out, "Math/Sum") || !strings.Contains(out, "75.0 %") || !strings.Contains(out, "4 calls") {
		t.Errorf("rpcd record -inspect: exit %d\n%s%s", code2, out, errs)
	}
	filtered := filepath.Join(dir, "filtered.rec")
	out, errs, code2 = callInProcess("record", "-filter", "-drop", "Bench/*", "-set", "tenant=test", "-o", filtered, file)
	if code2 != 0 || !strings.Contains(out, "3 calls") {
		t.Errorf("rpcd record -filter: exit %d: %s%s", code2, out, errs)
	}
	if out, _, _ := callInProcess("record", "-inspect", filtered); strings.Contains(out, "Bench/EchoPacket") || !strings.Contains(out, "100.0 %") {
		t.Errorf("the filtered recording:\n%s", out)
	}
	for _, args := range [][]string{{"record"}, {"record", "-inspect", file, "extra"}, {"record", "-filter", file}, {"record", "-redact", "A/B=hide", "-inspect", file}} {
		if _, errs, code := callInProcess(args...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d: %s", args, code, exitUsage, errs)
		}
	}
	if _, errs, code := callInProcess("record", "-filter", "-o", filtered, file); code != exitFail || !strings.Contains(errs, "exists") {
		t.Errorf("-filter over an existing file: exit %d: %s", code, errs)
	}
}
