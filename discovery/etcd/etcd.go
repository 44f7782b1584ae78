package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/rpcd/rpcd/client"
)

// Prefix is where services live in etcd's key space.
const Prefix = "/rpcd/services/"

// DefaultTTL is a registration's lease time to live when
// RegisterOptions.TTL is zero: how long a node that died without
// deregistering stays listed.
const DefaultTTL = 10 * time.Second

// Key returns the etcd key of node addr of service.
func Key(service, addr string) string { return Prefix + service + "/" + addr }

// NewClient returns an etcd client for endpoints, logging nothing (etcd's
// client logs through zap; rpcd logs through slog).
func NewClient(endpoints []string) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("rpcd: etcd client for %s: %w", strings.Join(endpoints, ","), err)
	}
	return cli, nil
}

// Endpoints splits a comma-separated list of etcd endpoints.
func Endpoints(list string) []string {
	var out []string
	for _, e := range strings.Split(list, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

func init() {
	client.RegisterScheme("etcd", func(authority string) (client.Resolver, error) {
		eps := Endpoints(authority)
		if len(eps) == 0 {
			return nil, errors.New("rpcd: etcd target names no endpoint (etcd://host:port[,host:port]/NAME)")
		}
		cli, err := NewClient(eps)
		if err != nil {
			return nil, err
		}
		return &Resolver{cli: cli, own: true}, nil
	})
}

// RegisterOptions configures Register. The zero RegisterOptions is valid.
type RegisterOptions struct {
	// TTL is the lease's time to live; default DefaultTTL. The lease is
	// renewed about every TTL/3.
	TTL time.Duration
	// Logger receives a line when the lease is lost and renewed; default
	// slog.Default().
	Logger *slog.Logger
}

// Registration is a node listed in etcd, under a lease kept alive until
// Deregister.
type Registration struct {
	cli   *clientv3.Client
	key   string
	value string
	ttl   time.Duration
	log   *slog.Logger

	cancel context.CancelFunc // ends keep
	done   chan struct{}      // closed when keep has returned

	mu          sync.Mutex
	lease       clientv3.LeaseID
	cancelAlive context.CancelFunc // ends the lease's keep-alive
}

// Register lists node as a member of service in etcd, under a lease of
// opts.TTL that a goroutine keeps alive; if the lease is ever lost (etcd
// unreachable for longer than the TTL), it registers again as soon as etcd
// answers. Deregister removes the node.
func Register(ctx context.Context, cli *clientv3.Client, service string, node client.Node, opts RegisterOptions) (*Registration, error) {
	if service == "" || strings.Contains(service, "/") {
		return nil, fmt.Errorf("rpcd: bad service name %q", service)
	}
	if node.Addr == "" {
		return nil, errors.New("rpcd: registering a node with no address")
	}
	value, err := json.Marshal(node)
	if err != nil {
		return nil, err
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	r := &Registration{cli: cli, key: Key(service, node.Addr), value: string(value), ttl: opts.TTL, log: opts.Logger, done: make(chan struct{})}
	alive, err := r.put(ctx)
	if err != nil {
		return nil, err
	}
	kctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.keep(kctx, alive)
	return r, nil
}

// put grants a lease, puts the key under it and starts keeping it alive.
func (r *Registration) put(ctx context.Context) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	secs := int64((r.ttl + time.Second - 1) / time.Second)
	lease, err := r.cli.Grant(ctx, secs)
	if err != nil {
		return nil, fmt.Errorf("rpcd: etcd lease for %s: %w", r.key, err)
	}
	if _, err := r.cli.Put(ctx, r.key, r.value, clientv3.WithLease(lease.ID)); err != nil {
		return nil, fmt.Errorf("rpcd: etcd put %s: %w", r.key, err)
	}
	// The keep-alive lives as long as the registration, not ctx.
	kctx, cancel := context.WithCancel(context.Background())
	alive, err := r.cli.KeepAlive(kctx, lease.ID)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("rpcd: etcd keep-alive for %s: %w", r.key, err)
	}
	r.mu.Lock()
	r.lease = lease.ID
	prev := r.cancelAlive
	r.cancelAlive = cancel
	r.mu.Unlock()
	if prev != nil {
		prev()
	}
	return alive, nil
}

// keep drains the keep-alive responses and registers again when the lease
// is lost, until ctx ends.
func (r *Registration) keep(ctx context.Context, alive <-chan *clientv3.LeaseKeepAliveResponse) {
	defer close(r.done)
	for {
	drain:
		for {
			select {
			case _, ok := <-alive:
				if !ok { // the lease expired, or etcd was unreachable for its TTL
					break drain
				}
			case <-ctx.Done():
				return
			}
		}
		r.log.Warn("rpcd: etcd lease lost; registering again", "key", r.key)
		for attempt := 0; ; attempt++ {
			pctx, cancel := context.WithTimeout(ctx, r.ttl)
			a, err := r.put(pctx)
			cancel()
			if err == nil {
				alive = a
				break
			}
			if ctx.Err() != nil {
				return
			}
			r.log.Warn("rpcd: etcd registration failed", "key", r.key, "err", err)
			select {
			case <-time.After(min(time.Second<<min(attempt, 4), r.ttl)):
			case <-ctx.Done():
				return
			}
		}
	}
}

// Key returns the registration's etcd key.
func (r *Registration) Key() string { return r.key }

// Deregister removes the node from etcd (it revokes the lease, and the key
// with it) and stops keeping it alive. Clients watching the service stop
// sending it new calls once their watch reports it. It is safe to call
// more than once.
func (r *Registration) Deregister(ctx context.Context) error {
	r.cancel()
	<-r.done
	r.mu.Lock()
	lease, cancelAlive := r.lease, r.cancelAlive
	r.lease, r.cancelAlive = 0, nil
	r.mu.Unlock()
	if cancelAlive != nil {
		cancelAlive()
	}
	if lease == 0 {
		return nil
	}
	if _, err := r.cli.Revoke(ctx, lease); err != nil {
		return fmt.Errorf("rpcd: etcd revoke for %s: %w", r.key, err)
	}
	return nil
}
