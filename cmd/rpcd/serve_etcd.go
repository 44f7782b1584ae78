package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/discovery/etcd"
	"github.com/rpcd/rpcd/handler"
)

// etcdFlags are serve's flags for registering in etcd (docs/scale-out.md).
type etcdFlags struct {
	endpoints string
	service   string
	advertise string
	weight    int
	meta      string
	ttl       time.Duration
}

func (f *etcdFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.endpoints, "etcd", "", "register in etcd at these `endpoints` (host:port, comma-separated) as a node of -service; empty for none (docs/scale-out.md)")
	fs.StringVar(&f.service, "service", "", "with -etcd: the service `name` clients dial as etcd://ENDPOINTS/NAME")
	fs.StringVar(&f.advertise, "advertise", "", "with -etcd: the `address` clients dial; empty means the address serve is bound to (which must then not be 0.0.0.0 or ::)")
	fs.IntVar(&f.weight, "weight", 1, "with -etcd: this node's share of calls relative to the others' (1 to 100)")
	fs.StringVar(&f.meta, "meta", "", "with -etcd: metadata listed with the node, as `key=value,...`")
	fs.DurationVar(&f.ttl, "etcd-ttl", etcd.DefaultTTL, "with -etcd: the lease's time to live: how long a node that died stays listed")
}

// check refuses flags that do not go together.
func (f *etcdFlags) check() error {
	switch {
	case f.endpoints == "" && (f.service != "" || f.advertise != "" || f.meta != ""):
		return usagef("-service, -advertise and -meta go with -etcd")
	case f.endpoints != "" && f.service == "":
		return usagef("-etcd needs -service, the name to register under")
	case f.service != "" && (strings.Contains(f.service, "/") || strings.TrimSpace(f.service) != f.service):
		return usagef("-service is %q, want a name without slashes or spaces", f.service)
	case f.weight < 1 || f.weight > client.MaxWeight:
		return usagef("-weight is %d, want 1 to %d", f.weight, client.MaxWeight)
	case f.ttl < time.Second:
		return usagef("-etcd-ttl is %v, want at least 1s", f.ttl)
	}
	_, err := f.metadata()
	return err
}

func (f *etcdFlags) metadata() (map[string]string, error) {
	if f.meta == "" {
		return nil, nil
	}
	m := map[string]string{}
	for _, kv := range strings.Split(f.meta, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("-meta has %q, want key=value", kv)
		}
		m[k] = v
	}
	return m, nil
}

// registration is serve's entry in etcd.
type registration struct {
	cli *clientv3.Client
	reg *etcd.Registration
	log *slog.Logger
}

// etcdRegisterTimeout bounds registering at start and deregistering at
// drain.
const etcdRegisterTimeout = 10 * time.Second

// register lists the server bound to bound, serving reg's routes, in etcd;
// nil when no -etcd is given.
func (f *etcdFlags) register(bound net.Addr, routes *handler.Registry, logger *slog.Logger) (*registration, error) {
	if f.endpoints == "" {
		return nil, nil
	}
	addr := f.advertise
	if addr == "" {
		addr = bound.String()
		if ta, ok := bound.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
			return nil, fmt.Errorf("serve is bound to %s, which clients cannot dial: give -advertise", addr)
		}
		if bound.Network() == "unix" {
			addr = "unix://" + addr
		}
	}
	meta, _ := f.metadata() // checked
	var names []string
	for _, r := range routes.Routes() {
		names = append(names, r.Name)
	}
	cli, err := etcd.NewClient(etcd.Endpoints(f.endpoints))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), etcdRegisterTimeout)
	defer cancel()
	reg, err := etcd.Register(ctx, cli, f.service, client.Node{Addr: addr, Weight: f.weight, Routes: names, Meta: meta}, etcd.RegisterOptions{TTL: f.ttl, Logger: logger})
	if err != nil {
		cli.Close()
		return nil, err
	}
	logger.Info("rpcd: registered", "etcd", f.endpoints, "key", reg.Key(), "weight", f.weight)
	return &registration{cli: cli, reg: reg, log: logger}, nil
}

// deregister removes the node from etcd, before the drain: clients stop
// sending it new calls while it answers those in flight. A failure is
// logged; the lease then runs out on its own.
func (r *registration) deregister() {
	if r == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), etcdRegisterTimeout)
	defer cancel()
	if err := r.reg.Deregister(ctx); err != nil {
		r.log.Warn("rpcd: deregistering failed; the lease will expire", "err", err)
	} else {
		r.log.Info("rpcd: deregistered", "key", r.reg.Key())
	}
	r.cli.Close()
}
