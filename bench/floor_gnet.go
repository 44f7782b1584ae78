package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// gnetFloor is a bare gnet v2 server that echoes the tcp floor's
// length-prefixed frames: in OnTraffic it peeks every whole frame buffered,
// appends it to one output buffer, discards it, and writes the lot with one
// Write per wake-up, as rpcd's reactor does, with the same gnet options
// (GOMAXPROCS event loops, TCP_NODELAY). Its client is the tcp floor's. The
// gap between it and rpcd is what rpcd's framing, routing and client add.
type gnetFloor struct{}

func init() { register(gnetFloor{}) }

func (gnetFloor) name() string { return "gnet-floor" }

type gnetEcho struct {
	gnet.BuiltinEventEngine
	booted chan struct{}
	eng    gnet.Engine
	addr   net.Addr
	err    error
}

// gnetOut holds the buffers that collect one wake-up's echoes.
var gnetOut = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

func (g *gnetEcho) OnBoot(eng gnet.Engine) gnet.Action {
	defer close(g.booted)
	g.eng = eng
	// Ask the kernel for the bound port (the address may be :0).
	fd, err := eng.Dup()
	if err != nil {
		g.err = err
		return gnet.Shutdown
	}
	f := os.NewFile(uintptr(fd), "listener")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		g.err = err
		return gnet.Shutdown
	}
	g.addr = ln.Addr()
	ln.Close()
	return gnet.None
}

func (g *gnetEcho) OnTraffic(c gnet.Conn) gnet.Action {
	bp := gnetOut.Get().(*[]byte)
	out := (*bp)[:0]
	action := gnet.None
	for {
		hdr, err := c.Peek(4)
		if err != nil {
			break // not a whole header yet
		}
		n := int(binary.BigEndian.Uint32(hdr))
		if n > maxFloorFrame {
			action = gnet.Close
			break
		}
		if c.InboundBuffered() < 4+n {
			break // wait for the rest
		}
		frame, _ := c.Peek(4 + n)
		out = append(out, frame...)
		_, _ = c.Discard(4 + n)
	}
	if len(out) > 0 {
		if _, err := c.Write(out); err != nil {
			action = gnet.Close
		}
	}
	if cap(out) <= 1<<20 {
		*bp = out[:0]
		gnetOut.Put(bp)
	}
	return action
}

func (gnetFloor) serve(addr string) (func(), string, error) {
	g := &gnetEcho{booted: make(chan struct{})}
	errc := make(chan error, 1)
	go func() {
		errc <- gnet.Run(g, "tcp://"+addr,
			gnet.WithNumEventLoop(runtime.GOMAXPROCS(0)),
			gnet.WithReuseAddr(true),
			gnet.WithTCPNoDelay(gnet.TCPNoDelay),
			gnet.WithLogger(silentGnetLogger{}),
		)
	}()
	select {
	case <-g.booted:
	case err := <-errc:
		return nil, "", fmt.Errorf("bench: gnet floor: %w", err)
	}
	if g.err != nil {
		return nil, "", fmt.Errorf("bench: gnet floor: %w", g.err)
	}
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = g.eng.Stop(ctx)
		select {
		case <-errc:
		case <-ctx.Done():
		}
	}
	return stop, g.addr.String(), nil
}

func (gnetFloor) dial(addr string, conns int) (caller, error) { return dialFloor(addr, conns) }

// silentGnetLogger drops gnet's informational logs and keeps its errors.
type silentGnetLogger struct{}

func (silentGnetLogger) Debugf(string, ...any) {}
func (silentGnetLogger) Infof(string, ...any)  {}
func (silentGnetLogger) Warnf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "gnet: "+format+"\n", args...)
}
func (silentGnetLogger) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "gnet: "+format+"\n", args...)
}
func (silentGnetLogger) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "gnet: "+format+"\n", args...)
	os.Exit(1)
}
