package main

import (
	"strings"
	"time"

	"github.com/rpcd/rpcd/client"
	_ "github.com/rpcd/rpcd/discovery/dns"  // the dns:// scheme of service targets
	_ "github.com/rpcd/rpcd/discovery/etcd" // the etcd:// scheme
	"github.com/rpcd/rpcd/proto"
)

// isServiceTarget reports whether addr names a service
// ("scheme://authority/NAME") rather than one server.
func isServiceTarget(addr string) bool {
	scheme, _, ok := strings.Cut(addr, "://")
	return ok && scheme != "unix" && scheme != "tcp"
}

// benchClientOptions returns the options of the clients bench and soak
// dial: one connection each, frames up to maxFrame, each dial bounded by
// timeout, and what the TLS, token and compression flags ask for.
func (c *cli) benchClientOptions(timeout time.Duration, maxFrame int, sec *clientSecurityFlags, compress *compressFlag) (client.Options, error) {
	opts := client.Options{
		Conns:        1,
		Limits:       proto.Limits{MaxFrameSize: maxFrame},
		DialTimeout:  timeout,
		ProbeTimeout: min(probeTimeout, timeout),
		Logger:       quietLogger(c.stderr),
	}
	if err := sec.apply(&opts); err != nil {
		return opts, err
	}
	if err := compress.apply(&opts); err != nil {
		return opts, err
	}
	return opts, nil
}
