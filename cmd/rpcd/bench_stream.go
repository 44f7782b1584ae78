package main

import (
	"context"
	"strings"

	"github.com/rpcd/rpcd/client"
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
	return c.runLoad(f, func(ctx context.Context, t *benchTarget, opts client.Options) (report, error) {
		return load.Stream(ctx, load.StreamConfig{
			Addr: t.addr, Server: t.String(), Client: opts,
			Upload: upload, Streams: f.conns, Size: int64(f.size), // 256 MiB if 0
		})
	})
}
