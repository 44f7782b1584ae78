package main

import (
	"strings"

	"github.com/rpcd/rpcd/load"
)

// benchStream runs a stream scenario (load.Stream) against the server of f
// (or a child server) and prints its report: -c streams at once, one per
// connection, each moving -size bytes to the server (StreamUpload) or from
// it (StreamDownload).
func (c *cli) benchStream(f *benchFlags) error {
	upload := strings.EqualFold(f.scenario, load.StreamUploadName)
	if f.conns < 1 {
		return usagef("-c is %d, want 1 or more", f.conns)
	}
	ctx, stop := c.interruptible()
	defer stop()
	t, stopTarget, err := c.loadTarget(ctx, f.addr)
	if err != nil {
		return err
	}
	defer stopTarget()
	opts, err := c.clientOptions(f.timeout, f.maxFrame, &f.sec, &f.compress)
	if err != nil {
		return err
	}
	rep, err := load.Stream(ctx, load.StreamConfig{
		Addr: t.addr, Server: t.String(), Client: opts,
		Upload: upload, Streams: f.conns, Size: int64(f.size), // 256 MiB if 0
	})
	if err != nil {
		return err
	}
	return c.writeReport(rep, f.jsonOut)
}
