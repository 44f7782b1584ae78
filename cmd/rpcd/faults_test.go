package main

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
)

// TestOutOfFileDescriptors is fault 11 of docs/reliability.md: `rpcd
// serve` under a low `ulimit -n` runs out of descriptors while accepting;
// it keeps serving the connections it has, backs off accepting, and takes
// the waiting connections in once descriptors are free again.
func TestOutOfFileDescriptors(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to set ulimit -n")
	}
	d := &daemon{exited: make(chan struct{})}
	d.cmd = exec.Command("sh", "-c", fmt.Sprintf("ulimit -n 24 && exec %s serve -addr 127.0.0.1:0 -loops 1", rpcdBin))
	d.cmd.Stderr = &d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.err = d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		_ = d.cmd.Process.Kill()
		<-d.exited
	})
	addr, err := waitServing(&d.log, d.exited)
	if err != nil {
		t.Fatalf("rpcd serve under ulimit -n 24: %v; log:\n%s", err, d.log.String())
	}

	// More connections than the server has descriptors for.
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range 40 {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		conns = append(conns, c)
	}
	if err := waitLog(&d.log, "backing off"); err != nil {
		t.Fatalf("the server never ran out of descriptors: %v; log:\n%s", err, d.log.String())
	}
	// Still running, and serving a connection it took in.
	if !pings(conns[0]) {
		t.Fatalf("the first connection is not served while the server is out of descriptors; log:\n%s", d.log.String())
	}
	select {
	case <-d.exited:
		t.Fatalf("rpcd serve exited: %v; log:\n%s", d.err, d.log.String())
	default:
	}

	// Free the descriptors: new connections are served again.
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		t.Fatalf("dial after freeing descriptors: %v", err)
	}
	defer cl.Close()
	reply, err := cl.CallRaw(ctx, builtin.EchoPacket, []byte("recovered"), nil)
	if err != nil || string(reply) != "recovered" {
		t.Fatalf("after freeing descriptors: %q, %v; log:\n%s", reply, err, d.log.String())
	}
	if strings.Count(d.log.String(), "level=ERROR") > 0 {
		t.Errorf("errors in the log:\n%s", d.log.String())
	}
}

// pings sends a Ping on c and reports whether a Pong comes back.
func pings(c net.Conn) bool {
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write(proto.AppendPing(nil, []byte("x"))); err != nil {
		return false
	}
	buf := make([]byte, 0, 64)
	tmp := make([]byte, 64)
	for {
		n, err := c.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if f, k, derr := proto.Decode(buf, nil); derr == nil && k > 0 {
			return f.Kind == proto.KindPong
		}
		if err != nil {
			return false
		}
	}
}
