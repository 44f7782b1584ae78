package main

import (
	"time"

	"github.com/rpcd/rpcd/client"
	_ "github.com/rpcd/rpcd/discovery/dns"  // the dns:// scheme of service targets
	_ "github.com/rpcd/rpcd/discovery/etcd" // the etcd:// scheme
	"github.com/rpcd/rpcd/proto"
)

// clientOptions returns the options of the clients the commands dial: one
// connection each, frames up to maxFrame, each dial bounded by timeout,
// the server probed (probeTimeout), and what the TLS, token and
// compression flags ask for.
func (c *cli) clientOptions(timeout time.Duration, maxFrame int, sec *clientSecurityFlags, compress *compressFlag) (client.Options, error) {
	opts := client.Options{
		Limits:       proto.Limits{MaxFrameSize: maxFrame},
		DialTimeout:  timeout,
		ProbeTimeout: min(probeTimeout, timeout),
		Logger:       quietLogger(c.stderr),
	}
	if err := sec.apply(&opts); err != nil {
		return opts, err
	}
	return opts, compress.apply(&opts)
}
