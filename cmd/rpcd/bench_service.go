package main

import (
	"context"
	"strings"

	"github.com/rpcd/rpcd/client"
	_ "github.com/rpcd/rpcd/discovery/dns"  // the dns:// scheme of service targets
	_ "github.com/rpcd/rpcd/discovery/etcd" // the etcd:// scheme
	"github.com/rpcd/rpcd/proto"
)

// caller is what a bench scenario calls through: a *client.Client to one
// server, or a *client.Cluster spreading calls over a service's nodes.
type caller interface {
	Call(ctx context.Context, route string, in, out any) error
	CallRaw(ctx context.Context, route string, req, reply []byte) ([]byte, error)
}

// isServiceTarget reports whether addr names a service
// ("scheme://authority/NAME") rather than one server.
func isServiceTarget(addr string) bool {
	scheme, _, ok := strings.Cut(addr, "://")
	return ok && scheme != "unix" && scheme != "tcp"
}

// dialCallers opens n callers on addr: clients of one connection each for
// a server, or, for a service, n Clusters each with one connection to
// every node (by -balance). It returns the function that closes them.
func (c *cli) dialCallers(ctx context.Context, addr string, n int, f *benchFlags) ([]caller, func(), error) {
	callers := make([]caller, 0, n)
	if !isServiceTarget(addr) {
		clients, err := c.dialBench(ctx, addr, n, f)
		if err != nil {
			return nil, nil, err
		}
		for _, cl := range clients {
			callers = append(callers, cl)
		}
		return callers, func() {
			for _, cl := range clients {
				cl.Close()
			}
		}, nil
	}
	opts := client.ServiceOptions{Options: client.Options{
		Conns:        1,
		Limits:       proto.Limits{MaxFrameSize: f.maxFrame},
		DialTimeout:  f.timeout,
		ProbeTimeout: min(probeTimeout, f.timeout),
		Logger:       quietLogger(c.stderr),
	}}
	if err := f.sec.apply(&opts.Options); err != nil {
		return nil, nil, err
	}
	if err := f.compress.apply(&opts.Options); err != nil {
		return nil, nil, err
	}
	if err := f.etcd.registerScheme(); err != nil {
		return nil, nil, err
	}
	clusters := make([]*client.Cluster, 0, n)
	closeAll := func() {
		for _, k := range clusters {
			k.Close()
		}
	}
	for i := range n {
		opts := opts
		f.balance.apply(&opts, i)
		dctx, cancel := context.WithTimeout(ctx, f.timeout)
		k, err := client.DialService(dctx, addr, opts)
		cancel()
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		clusters = append(clusters, k)
		callers = append(callers, k)
	}
	return callers, closeAll, nil
}
