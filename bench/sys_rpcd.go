package main

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/reactor"
)

// rpcdSystem serves rpcd's built-in routes (Bench/EchoPacket: a raw echo,
// read in place and appended to the reply buffer on the event loop) from a
// reactor with default options but for its loops (ownProcess), and calls
// them with client.CallRaw into a per-caller reply buffer. One
// client.Client holds all of a cell's connections; it spreads calls over
// them itself (a connection no one reads first, then one only its
// listener reads, else round robin).
type rpcdSystem struct {
	// register, if set, replaces builtin.Register (tests use it to serve a
	// wrong echo).
	register func(*handler.Registry)
}

func init() { register(rpcdSystem{}) }

// ownProcess is set in a server child (bench -serve), where nothing but the
// server waits on the network: rpcd's server then runs a loop per P, as
// `rpcd serve` does. In this process (-inproc, tests) it keeps the
// reactor's default, which leaves a P to the load's goroutines
// (reactor.Options.Loops).
var ownProcess bool

func (rpcdSystem) name() string { return "rpcd" }

// quietLogger drops everything below warnings, so a server's or client's
// per-connection chatter does not interleave with the tables.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func (s rpcdSystem) serve(addr string) (func(), string, error) {
	reg := handler.NewRegistry()
	if s.register != nil {
		s.register(reg)
	} else {
		builtin.Register(reg)
	}
	opts := reactor.Options{Logger: quietLogger()}
	if ownProcess {
		opts.Loops = runtime.GOMAXPROCS(0)
	}
	srv := reactor.New(reg, opts)
	if err := srv.Start(addr); err != nil {
		return nil, "", err
	}
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
	return stop, srv.Addr().String(), nil
}

func (rpcdSystem) dial(addr string, conns int) (caller, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.Options{Conns: conns, Logger: quietLogger()})
	if err != nil {
		return nil, err
	}
	return rpcdCaller{c}, nil
}

type rpcdCaller struct{ c *client.Client }

func (r rpcdCaller) call(ctx context.Context, _ int, req, reply []byte) ([]byte, error) {
	return r.c.CallRaw(ctx, builtin.EchoPacket, req, reply[:0])
}

func (r rpcdCaller) close() error { return r.c.Close() }
