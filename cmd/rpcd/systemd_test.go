package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProcessServeNotify runs `rpcd serve` as systemd runs a unit of
// Type=notify, with $NOTIFY_SOCKET naming a datagram socket the test reads:
// READY=1 comes once serve answers calls, STOPPING=1 when SIGTERM begins
// the drain, each with a STATUS= line.
func TestProcessServeNotify(t *testing.T) {
	needSignals(t)
	dir, err := os.MkdirTemp("", "rpcd-notify-") // short: a socket's path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "notify")
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	next := func() string {
		t.Helper()
		buf := make([]byte, 4096)
		_ = sock.SetReadDeadline(time.Now().Add(startTimeout))
		n, err := sock.Read(buf)
		if err != nil {
			t.Fatalf("reading $NOTIFY_SOCKET: %v", err)
		}
		return string(buf[:n])
	}

	d := startServeEnv(t, []string{"NOTIFY_SOCKET=" + path}, "-gateway", "127.0.0.1:0")
	if got, want := next(), "READY=1\nSTATUS=serving on "+d.addr; got != want {
		t.Errorf("first notification %q, want %q", got, want)
	}
	if r := rpcd(t, "", "call", "-addr", d.addr, "Sys/Ping"); r.code != 0 {
		t.Errorf("a call once READY=1 came: exit %d, %s", r.code, r.stderr)
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got, want := next(), "STOPPING=1\nSTATUS=draining on terminated"; got != want {
		t.Errorf("notification after SIGTERM %q, want %q", got, want)
	}
	select {
	case <-d.exited:
	case <-time.After(stopTimeout):
		t.Fatalf("rpcd serve did not exit within %v of SIGTERM; log:\n%s", stopTimeout, d.log.String())
	}
	if d.err != nil {
		t.Errorf("rpcd serve after SIGTERM: %v; log:\n%s", d.err, d.log.String())
	}
	if strings.Contains(d.log.String(), "cannot notify systemd") {
		t.Errorf("the log has a failed notification:\n%s", d.log.String())
	}
}
