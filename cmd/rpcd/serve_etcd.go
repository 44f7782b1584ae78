package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
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
	zone      string
	ttl       time.Duration
	access    etcdAccessFlags
	config    etcd.Config // how to reach etcd, made by check
}

func (f *etcdFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.endpoints, "etcd", "", "register in etcd at these `endpoints` (host:port, comma-separated) as a node of -service; empty for none (docs/scale-out.md)")
	fs.StringVar(&f.service, "service", "", "with -etcd: the service `name` clients dial as etcd://ENDPOINTS/NAME")
	fs.StringVar(&f.advertise, "advertise", "", "with -etcd: the `address` clients dial; empty means the address serve is bound to (which must then not be 0.0.0.0 or ::)")
	fs.IntVar(&f.weight, "weight", 1, "with -etcd: this node's share of calls relative to the others' (1 to 100)")
	fs.StringVar(&f.meta, "meta", "", "with -etcd: metadata listed with the node, as `key=value,...`")
	fs.StringVar(&f.zone, "zone", "", "with -etcd: the node's `zone`, listed as its metadata zone=...; clients in the same zone prefer it (docs/scale-out.md)")
	fs.DurationVar(&f.ttl, "etcd-ttl", etcd.DefaultTTL, "with -etcd: the lease's time to live: how long a node that died stays listed")
	f.access.define(fs, "with -etcd")
}

// check refuses flags that do not go together, and an address serve
// listens on (addr) that clients could not dial without -advertise; it
// reads the files of the etcd access flags. It reports every mistake.
func (f *etcdFlags) check(addr string) error {
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	if f.endpoints == "" && (f.service != "" || f.advertise != "" || f.meta != "" || f.zone != "") {
		add(usagef("-service, -advertise, -meta and -zone go with -etcd"))
	}
	if strings.ContainsAny(f.zone, ", =") {
		add(usagef("-zone is %q, want a name without commas, spaces or =", f.zone))
	}
	if f.endpoints == "" && f.access.given() {
		add(usagef("-etcd-tls, -etcd-cacert, -etcd-cert, -etcd-key, -etcd-user and -etcd-password-file go with -etcd"))
	}
	if f.endpoints != "" && f.service == "" {
		add(usagef("-etcd needs -service, the name to register under"))
	}
	if f.service != "" && (strings.Contains(f.service, "/") || strings.TrimSpace(f.service) != f.service) {
		add(usagef("-service is %q, want a name without slashes or spaces", f.service))
	}
	if f.weight < 1 || f.weight > client.MaxWeight {
		add(usagef("-weight is %d, want 1 to %d", f.weight, client.MaxWeight))
	}
	if f.ttl < time.Second {
		add(usagef("-etcd-ttl is %v, want at least 1s", f.ttl))
	}
	if _, err := f.metadata(); err != nil {
		add(err)
	}
	if err := f.access.check(); err != nil {
		add(err)
	} else if f.endpoints != "" {
		cfg, err := f.access.config(etcd.Endpoints(f.endpoints))
		add(fileError(err, map[string]string{"etcd-cacert": f.access.cacert, "etcd-cert": f.access.cert, "etcd-key": f.access.key, "etcd-password-file": f.access.passwordFile}))
		f.config = cfg
	}
	if f.endpoints != "" && f.advertise == "" && unspecifiedHost(addr) {
		add(usagef("-addr is %s, which clients cannot dial: give -advertise, the address to register", addr))
	}
	return errors.Join(errs...)
}

// unspecifiedHost reports whether addr, a TCP address serve listens on,
// has no host or an unspecified one (0.0.0.0, ::): every interface.
func unspecifiedHost(addr string) bool {
	if strings.HasPrefix(addr, "unix://") {
		return false
	}
	host, _, err := net.SplitHostPort(strings.TrimPrefix(addr, "tcp://"))
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "" || ip != nil && ip.IsUnspecified()
}

func (f *etcdFlags) metadata() (map[string]string, error) {
	if f.meta == "" && f.zone == "" {
		return nil, nil
	}
	m := map[string]string{}
	if f.meta != "" {
		for _, kv := range strings.Split(f.meta, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, usagef("-meta has %q, want key=value", kv)
			}
			m[k] = v
		}
	}
	if f.zone != "" {
		if _, dup := m[client.ZoneKey]; dup {
			return nil, usagef("-meta names a zone, and so does -zone: give one")
		}
		m[client.ZoneKey] = f.zone
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
	cli, err := etcd.Connect(f.config)
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
	attrs := []any{"etcd", f.endpoints, "key", reg.Key(), "weight", f.weight}
	if f.zone != "" {
		attrs = append(attrs, "zone", f.zone)
	}
	logger.Info("rpcd: registered", attrs...)
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

// etcdAccessFlags reach an etcd that is secured: with TLS, with
// authentication, or both. serve's -etcd and bench's etcd:// targets take
// them (docs/scale-out.md, "A secured etcd").
type etcdAccessFlags struct {
	tls                bool
	cacert, cert, key  string
	user, passwordFile string
}

func (f *etcdAccessFlags) define(fs *flag.FlagSet, with string) {
	fs.BoolVar(&f.tls, "etcd-tls", false, with+": speak TLS to etcd, trusting the system's CAs (implied by -etcd-cacert and -etcd-cert; https:// endpoints speak TLS anyway)")
	fs.StringVar(&f.cacert, "etcd-cacert", "", with+": trust the etcd certificates these CAs sign (PEM `file`) instead of the system's")
	fs.StringVar(&f.cert, "etcd-cert", "", with+": present this client certificate (PEM `file`) to etcd; with -etcd-key")
	fs.StringVar(&f.key, "etcd-key", "", with+": the etcd client certificate's private key (PEM `file`)")
	fs.StringVar(&f.user, "etcd-user", "", with+": authenticate to etcd as this `user`; with -etcd-password-file")
	fs.StringVar(&f.passwordFile, "etcd-password-file", "", with+": the etcd user's password, the first line of this `file`")
}

// given reports whether any of the flags is set.
func (f *etcdAccessFlags) given() bool {
	return f.tls || f.cacert != "" || f.cert != "" || f.key != "" || f.user != "" || f.passwordFile != ""
}

// check refuses flags that do not go together.
func (f *etcdAccessFlags) check() error {
	switch {
	case (f.cert == "") != (f.key == ""):
		return usagef("-etcd-cert and -etcd-key go together")
	case (f.user == "") != (f.passwordFile == ""):
		return usagef("-etcd-user and -etcd-password-file go together")
	}
	return nil
}

// config returns the etcd.Config the flags ask for, for endpoints: the
// certificate files and the password read.
func (f *etcdAccessFlags) config(endpoints []string) (etcd.Config, error) {
	cfg := etcd.Config{Endpoints: endpoints}
	if f.tls || f.cacert != "" || f.cert != "" {
		var err error
		if cfg.TLS, err = etcd.TLSFiles(f.cacert, f.cert, f.key); err != nil {
			return cfg, err
		}
	}
	if f.user != "" {
		b, err := os.ReadFile(f.passwordFile)
		if err != nil {
			return cfg, fmt.Errorf("rpcd: reading the etcd password: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if cfg.Password = strings.TrimRight(line, "\r"); cfg.Password == "" {
			return cfg, fmt.Errorf("rpcd: no etcd password on the first line of %s", f.passwordFile)
		}
		cfg.Username = f.user
	}
	return cfg, nil
}

// checkTarget refuses the flags for a target addr that is not etcd's, and
// flags that do not go together.
func (f *etcdAccessFlags) checkTarget(addr string) error {
	if f.given() && !strings.HasPrefix(addr, "etcd://") {
		return usagef("the -etcd-... flags go with an etcd:// -addr")
	}
	return f.check()
}

// registerScheme, if any of the flags is set, has the etcd:// scheme of
// service targets reach etcd as they say.
func (f *etcdAccessFlags) registerScheme() error {
	if !f.given() {
		return nil
	}
	cfg, err := f.config(nil)
	if err != nil {
		return err
	}
	etcd.RegisterScheme("etcd", cfg)
	return nil
}
