package main

import (
	"context"
	"io"
	"strconv"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/load"
)

// benchFanOut runs the FanOut scenario (load.FanOut) against the server of
// f (or a child server) and prints its report.
func (c *cli) benchFanOut(f *benchFlags) error {
	if f.subs < 1 {
		return usagef("-subs is %d, want 1 or more", f.subs)
	}
	if f.duration <= 0 {
		return usagef("-d is %v, want more than 0", f.duration)
	}
	return c.runLoad(f, func(ctx context.Context, t *benchTarget, opts client.Options) (report, error) {
		return load.FanOut(ctx, load.FanOutConfig{
			Addr: t.addr, Server: t.String(), Client: opts,
			Subscribers: f.subs, Size: f.size, Duration: f.duration, Warmup: f.warmup, Timeout: f.timeout,
		})
	}, "-max-conns", strconv.Itoa(f.subs+16))
}

// report is what a load writes: a table, or JSON.
type report interface{ WriteText(io.Writer) error }

// runLoad runs a load of bench against the server of f (or a child server
// started with args) with clients of f's options, and writes its report.
func (c *cli) runLoad(f *benchFlags, run func(context.Context, *benchTarget, client.Options) (report, error), args ...string) error {
	ctx, stop := c.interruptible()
	defer stop()
	t, stopTarget, err := c.loadTarget(ctx, f.addr, args...)
	if err != nil {
		return err
	}
	defer stopTarget()
	opts, err := c.clientOptions(f.timeout, f.maxFrame, &f.sec, &f.compress)
	if err != nil {
		return err
	}
	rep, err := run(ctx, t, opts)
	if err != nil {
		return err
	}
	return c.writeReport(rep, f.jsonOut)
}
