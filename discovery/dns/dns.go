package dns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rpcd/rpcd/client"
)

func init() {
	client.RegisterScheme("dns", func(authority string) (client.Resolver, error) {
		return New(Config{Server: authority}), nil
	})
}

// Config configures a Resolver. The zero Config asks the system's resolver
// every 30 seconds.
type Config struct {
	// Server, if set, is the DNS server ("host:port", or a host for port
	// 53) asked instead of the system's resolver, over UDP and, for a
	// truncated answer, TCP.
	Server string

	// Refresh is how often a service's name is looked up again; default
	// 30s.
	Refresh time.Duration

	// Timeout bounds each lookup; default 5s.
	Timeout time.Duration
}

// Resolver is a client.Resolver over DNS. A service, for it, is a name:
// "host:port" for the A and AAAA records of host, each a node on port;
// a name without a port for its SRV records (as "_rpcd._tcp.example.com"),
// each target's addresses a node on the record's port, weighted by the
// record's weight. Of SRV records of several priorities, only those of the
// lowest (the most preferred) are nodes. Either may end in
// "?refresh=DURATION" ("?refresh=5s"), which Watch looks it up again at
// instead of Config.Refresh: a target's way to say so
// ("dns:///echo.example:7070?refresh=5s").
type Resolver struct {
	cfg  Config
	r    *net.Resolver
	errs sync.Map // service -> error: why its last lookup found no node
}

// New returns a Resolver with cfg.
func New(cfg Config) *Resolver {
	if cfg.Refresh <= 0 {
		cfg.Refresh = 30 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	r := net.DefaultResolver
	if cfg.Server != "" {
		server := cfg.Server
		if _, _, err := net.SplitHostPort(server); err != nil {
			server = net.JoinHostPort(server, "53")
		}
		r = &net.Resolver{
			PreferGo: true, // the cgo resolver cannot be pointed at a server
			Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, server)
			},
		}
	}
	return &Resolver{cfg: cfg, r: r}
}

// Watch follows the nodes service names (see Resolver): it looks them up
// at once and every Config.Refresh, and sends the set whenever it changes.
// A service that is not a host with a port or a name is an error.
func (r *Resolver) Watch(ctx context.Context, service string) (<-chan []client.Node, error) {
	lookup, name, every, err := r.lookupFor(service)
	if err != nil {
		return nil, err
	}
	if every == 0 {
		every = r.cfg.Refresh
	}
	ch := make(chan []client.Node, 1)
	go func() {
		defer close(ch)
		t := time.NewTicker(every)
		defer t.Stop()
		var last []client.Node
		for {
			lctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
			nodes, err := lookup(lctx)
			cancel()
			if err == nil && len(nodes) == 0 {
				err = errors.New("rpcd: " + name + " has no address records")
			}
			if err != nil {
				r.errs.Store(service, err)
			} else {
				r.errs.Delete(service)
			}
			if err == nil && !slices.EqualFunc(nodes, last, sameNode) {
				select {
				case ch <- nodes:
					last = nodes
				case <-ctx.Done():
					return
				}
			}
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

// LastError returns why the last lookup of service found no node, nil if
// it found some (or none has ended yet): for client.DialService's error.
func (r *Resolver) LastError(service string) error {
	if err, ok := r.errs.Load(service); ok {
		return err.(error)
	}
	return nil
}

// Lookup returns the nodes service names now, sorted by address.
func (r *Resolver) Lookup(ctx context.Context, service string) ([]client.Node, error) {
	lookup, _, _, err := r.lookupFor(service)
	if err != nil {
		return nil, err
	}
	return lookup(ctx)
}

// splitRefresh splits service into its name and the refresh its
// "?refresh=DURATION" asks for; 0 when it asks none. Any other parameter,
// or a duration that is not positive, is an error.
func splitRefresh(service string) (string, time.Duration, error) {
	name, query, ok := strings.Cut(service, "?")
	if !ok {
		return service, 0, nil
	}
	key, value, _ := strings.Cut(query, "=")
	d, err := time.ParseDuration(value)
	if key != "refresh" || err != nil || d <= 0 {
		return "", 0, fmt.Errorf("rpcd: dns service %q: the one parameter is refresh=DURATION, positive (\"?refresh=5s\")", service)
	}
	return name, d, nil
}

// lookupFor returns the lookup service asks for, the name it looks up,
// and the refresh its "?refresh=" asks for (0 when it asks none).
func (r *Resolver) lookupFor(service string) (lookup func(context.Context) ([]client.Node, error), name string, every time.Duration, err error) {
	if name, every, err = splitRefresh(service); err != nil {
		return nil, "", 0, err
	}
	if host, port, err := net.SplitHostPort(name); err == nil {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
			return nil, "", 0, fmt.Errorf("rpcd: dns service %q: want host:port with a port from 1 to 65535, or a name for its SRV records", service)
		}
		return func(ctx context.Context) ([]client.Node, error) { return r.lookupHost(ctx, host, port, 0) }, name, every, nil
	}
	if name == "" || strings.ContainsAny(name, ":/ ") {
		return nil, "", 0, fmt.Errorf("rpcd: dns service %q: want host:port, or a name for its SRV records", service)
	}
	return func(ctx context.Context) ([]client.Node, error) { return r.lookupSRV(ctx, name) }, name, every, nil
}

// lookupHost returns a node on port for each address of host.
func (r *Resolver) lookupHost(ctx context.Context, host, port string, weight int) ([]client.Node, error) {
	addrs, err := r.r.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, err
	}
	nodes := make([]client.Node, 0, len(addrs))
	for _, a := range addrs {
		nodes = append(nodes, client.Node{Addr: net.JoinHostPort(a.IP.String(), port), Weight: weight})
	}
	sortNodes(nodes)
	return nodes, nil
}

// lookupSRV returns the nodes of name's SRV records of the lowest
// priority: each target's addresses, on the record's port and with its
// weight. Targets are resolved here, by the same server, so that a Config
// that names one serves the whole lookup.
func (r *Resolver) lookupSRV(ctx context.Context, name string) ([]client.Node, error) {
	_, srvs, err := r.r.LookupSRV(ctx, "", "", name)
	if err != nil {
		return nil, err
	}
	if len(srvs) == 0 {
		return nil, errors.New("rpcd: no SRV records for " + name)
	}
	best := srvs[0].Priority
	for _, s := range srvs {
		best = min(best, s.Priority)
	}
	var nodes []client.Node
	for _, s := range srvs {
		if s.Priority != best {
			continue
		}
		target := strings.TrimSuffix(s.Target, ".")
		if ip := net.ParseIP(target); ip != nil {
			nodes = append(nodes, client.Node{Addr: net.JoinHostPort(target, strconv.Itoa(int(s.Port))), Weight: int(s.Weight)})
			continue
		}
		ns, err := r.lookupHost(ctx, target, strconv.Itoa(int(s.Port)), int(s.Weight))
		if err != nil {
			continue // that target alone is missing: the others serve
		}
		nodes = append(nodes, ns...)
	}
	if len(nodes) == 0 {
		return nil, errors.New("rpcd: no SRV target of " + name + " resolves")
	}
	scaleWeights(nodes)
	sortNodes(nodes)
	// An address two records name is one node, at the larger weight.
	return slices.CompactFunc(nodes, func(a, b client.Node) bool { return a.Addr == b.Addr }), nil
}

// scaleWeights brings SRV weights (0 to 65535) within client.MaxWeight,
// keeping their proportions as far as whole numbers allow; a weight of 0,
// which SRV allows for "rarely", counts as 1, as client.Node's does.
func scaleWeights(nodes []client.Node) {
	top := 0
	for _, n := range nodes {
		top = max(top, n.Weight)
	}
	if top <= client.MaxWeight {
		return
	}
	for i := range nodes {
		nodes[i].Weight = max(1, nodes[i].Weight*client.MaxWeight/top)
	}
}

// sortNodes sorts nodes by address, the heavier first among equal ones.
func sortNodes(nodes []client.Node) {
	slices.SortFunc(nodes, func(a, b client.Node) int {
		if c := strings.Compare(a.Addr, b.Addr); c != 0 {
			return c
		}
		return b.Weight - a.Weight
	})
}

func sameNode(a, b client.Node) bool { return a.Addr == b.Addr && a.Weight == b.Weight }
