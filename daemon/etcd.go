package daemon

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/discovery/etcd"
)

// etcdRegisterTimeout bounds registering at start and deregistering at
// drain.
const etcdRegisterTimeout = 10 * time.Second

// registration is the daemon's node in etcd.
type registration struct {
	close func() error // the etcd client's Close
	reg   *etcd.Registration
}

// register lists the daemon's node in etcd, under the address clients
// dial (Advertise, or the address the RPC port is bound to) with the
// routes it serves.
func (d *Daemon) register() error {
	cfg := &d.cfg
	addr := cfg.Advertise
	if addr == "" {
		bound := d.srv.Addr()
		addr = bound.String()
		if ta, ok := bound.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
			return fmt.Errorf("rpcd: bound to %s, which clients cannot dial: give advertise", addr)
		}
		if bound.Network() == "unix" {
			addr = "unix://" + addr
		}
	}
	var names []string
	for _, r := range d.reg.Routes() {
		names = append(names, r.Name)
	}
	cli, err := etcd.Connect(d.etcd)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), etcdRegisterTimeout)
	defer cancel()
	reg, err := etcd.Register(ctx, cli, cfg.Service, client.Node{Addr: addr, Weight: cfg.Weight, Routes: names, Meta: d.meta}, etcd.RegisterOptions{TTL: cfg.EtcdTTL, Logger: d.log})
	if err != nil {
		cli.Close()
		return err
	}
	attrs := []any{"etcd", cfg.Etcd, "key", reg.Key(), "weight", cfg.Weight}
	if cfg.Zone != "" {
		attrs = append(attrs, "zone", cfg.Zone)
	}
	d.log.Info("rpcd: registered", attrs...)
	d.node = &registration{close: cli.Close, reg: reg}
	return nil
}

// deregister removes the node from etcd, before the drain: clients stop
// sending it new calls while it answers those in flight. A failure is
// logged; the lease then runs out on its own.
func (d *Daemon) deregister() {
	if d.node == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), etcdRegisterTimeout)
	defer cancel()
	if err := d.node.reg.Deregister(ctx); err != nil {
		d.log.Warn("rpcd: deregistering failed; the lease will expire", "err", err)
	} else {
		d.log.Info("rpcd: deregistered", "key", d.node.reg.Key())
	}
	d.node.close()
}
