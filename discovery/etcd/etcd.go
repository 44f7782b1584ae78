package etcd

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

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

// Config is how to reach etcd: its endpoints and, for a secured cluster,
// TLS and a user. The zero Config but for Endpoints reaches a plain one.
type Config struct {
	// Endpoints are etcd's client URLs: host:port, or http:// and https://
	// URLs. An https:// endpoint speaks TLS even without TLS below,
	// verifying etcd's certificate against the system's roots; an http://
	// one never does.
	Endpoints []string

	// TLS, if set, speaks TLS to every endpoint that is not http://: its
	// RootCAs verify etcd's certificate, and a client certificate in it
	// answers etcd's --client-cert-auth. TLSFiles builds one from files.
	TLS *tls.Config

	// Username and Password authenticate to an etcd whose authentication
	// is enabled; empty for none. The user needs read and write on the
	// prefix /rpcd/services/ (docs/scale-out.md).
	Username, Password string

	// DialTimeout bounds connecting to etcd, and authenticating; default
	// DefaultDialTimeout.
	DialTimeout time.Duration
}

// DefaultDialTimeout is Config.DialTimeout's default.
const DefaultDialTimeout = 5 * time.Second

// reconnectMax is the longest wait between attempts to reconnect to etcd.
const reconnectMax = time.Second

// Connect returns an etcd client for cfg, logging nothing (etcd's client
// logs through zap; rpcd logs through slog). With a user it authenticates
// before it returns, and fails if etcd refuses the password; a TLS
// mismatch shows on the first request.
func Connect(cfg Config) (*clientv3.Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("rpcd: etcd client with no endpoint")
	}
	if (cfg.Username == "") != (cfg.Password == "") {
		return nil, errors.New("rpcd: etcd user and password go together")
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		TLS:         cfg.TLS,
		Username:    cfg.Username,
		Password:    cfg.Password,
		Logger:      zap.NewNop(),
		// A connection that breaks is dialled again within a second, for
		// as long as etcd is away: gRPC's own backoff grows to 120 s, so
		// that after an outage of a minute the client would come back up
		// to a minute after etcd did, too late for a lease etcd revives
		// for its TTL.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: reconnectMax},
			MinConnectTimeout: cfg.DialTimeout,
		})},
		// A connection to an etcd that went silent (a cut, not a refusal)
		// is found broken within DialKeepAliveTime plus its timeout.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
	})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			// What etcd's client says when the TLS handshake fails.
			err = fmt.Errorf("no answer within %v: unreachable, or not speaking TLS as configured (%w)", cfg.DialTimeout, err)
		}
		return nil, fmt.Errorf("rpcd: etcd client for %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	return cli, nil
}

// NewClient returns an etcd client for endpoints: Connect with neither TLS
// nor a user.
func NewClient(endpoints []string) (*clientv3.Client, error) {
	return Connect(Config{Endpoints: endpoints})
}

// TLSFiles returns the TLS configuration for etcd that etcdctl's --cacert,
// --cert and --key make: caFile (PEM) verifies etcd's certificate, the
// system's roots if empty; certFile and keyFile, if given, are the client
// certificate etcd's --client-cert-auth asks for, read again at each
// handshake, so a renewed certificate is picked up without a restart.
func TLSFiles(caFile, certFile, keyFile string) (*tls.Config, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("rpcd: etcd client certificate and key go together")
	}
	info := transport.TLSInfo{TrustedCAFile: caFile, CertFile: certFile, KeyFile: keyFile}
	cfg, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("rpcd: etcd TLS: %w", err)
	}
	return cfg, nil
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

func init() { RegisterScheme("etcd", Config{}) }

// RegisterScheme makes client.DialService resolve targets
// "scheme://ENDPOINTS/NAME" in etcd, reaching the target's endpoints
// (host:port, comma-separated) with cfg's TLS and user; cfg.Endpoints is
// ignored. Importing this package registers "etcd" with neither; a program
// whose etcd is secured registers "etcd" again with its own Config, before
// it dials:
//
//	tlsCfg, err := etcd.TLSFiles("ca.pem", "client.pem", "client-key.pem")
//	...
//	etcd.RegisterScheme("etcd", etcd.Config{TLS: tlsCfg, Username: "rpcd", Password: pw})
//	k, err := client.DialService(ctx, "etcd://10.0.0.1:2379/echo", opts)
//
// To share one etcd client among services instead, give
// client.ServiceOptions a Resolver from NewResolver.
func RegisterScheme(scheme string, cfg Config) {
	client.RegisterScheme(scheme, func(authority string) (client.Resolver, error) {
		cfg := cfg
		cfg.Endpoints = Endpoints(authority)
		if len(cfg.Endpoints) == 0 {
			return nil, fmt.Errorf("rpcd: %s target names no endpoint (%s://host:port[,host:port]/NAME)", scheme, scheme)
		}
		cli, err := Connect(cfg)
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
	// Logger receives a line when etcd has not renewed the lease within
	// its TTL, and one when the node is listed again; default
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
// opts.TTL that a goroutine keeps alive until Deregister, through outages
// of etcd: when etcd has not answered for the lease's TTL, the goroutine
// renews the same lease as soon as etcd answers again (etcd revives the
// leases it holds, for their TTL, when it comes back), and only if etcd
// no longer has it, registers under a new one. Its attempts last a second
// each and follow each other within a second, so the node is listed again
// within about two seconds of etcd's return.
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
	alive, rev, err := r.put(ctx)
	if err != nil {
		return nil, err
	}
	kctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.keep(kctx, alive, rev)
	return r, nil
}

// put grants a lease, puts the key under it and starts keeping it alive;
// rev is the put's revision in etcd.
func (r *Registration) put(ctx context.Context) (alive <-chan *clientv3.LeaseKeepAliveResponse, rev int64, err error) {
	secs := int64((r.ttl + time.Second - 1) / time.Second)
	lease, err := r.cli.Grant(ctx, secs)
	if err != nil {
		return nil, 0, fmt.Errorf("rpcd: etcd lease for %s: %w", r.key, err)
	}
	resp, err := r.cli.Put(ctx, r.key, r.value, clientv3.WithLease(lease.ID))
	if err != nil {
		// Not left to its TTL: a user refused the key holds leases too.
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _ = r.cli.Revoke(rctx, lease.ID)
		cancel()
		return nil, 0, fmt.Errorf("rpcd: etcd put %s: %w", r.key, err)
	}
	alive, err = r.keepAlive(lease.ID)
	return alive, resp.Header.Revision, err
}

// keepAlive starts keeping lease alive, in place of the lease kept alive
// so far, if any.
func (r *Registration) keepAlive(lease clientv3.LeaseID) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	// The keep-alive lives as long as the registration, not a caller's
	// context.
	kctx, cancel := context.WithCancel(context.Background())
	alive, err := r.cli.KeepAlive(kctx, lease)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("rpcd: etcd keep-alive for %s: %w", r.key, err)
	}
	r.mu.Lock()
	r.lease = lease
	prev := r.cancelAlive
	r.cancelAlive = cancel
	r.mu.Unlock()
	if prev != nil {
		prev()
	}
	return alive, nil
}

// renewAttempt bounds one attempt to renew the lease, or to register
// again, once etcd has not renewed it within its TTL; renewWaitMax is the
// longest wait between attempts (they start 100 ms apart and double).
const (
	renewAttempt = time.Second
	renewWaitMax = time.Second
)

// renew keeps the registration's lease alive again if etcd still has it,
// and otherwise registers under a new one (fresh is then true). Its lease
// still alive, the key is put back under it if it is no longer there.
func (r *Registration) renew(ctx context.Context) (alive <-chan *clientv3.LeaseKeepAliveResponse, fresh bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, renewAttempt)
	defer cancel()
	r.mu.Lock()
	lease := r.lease
	r.mu.Unlock()
	if lease != 0 {
		_, err := r.cli.KeepAliveOnce(ctx, lease)
		switch {
		case err == nil:
			if err := r.ensure(ctx, lease); err != nil {
				return nil, false, err
			}
			alive, err := r.keepAlive(lease)
			return alive, false, err
		case !errors.Is(err, rpctypes.ErrLeaseNotFound):
			return nil, false, err
		}
	}
	alive, _, err = r.put(ctx)
	return alive, true, err
}

// ensure puts the key, under lease, unless it is there with the
// registration's value under lease already (someone may have deleted it).
func (r *Registration) ensure(ctx context.Context, lease clientv3.LeaseID) error {
	_, err := r.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.LeaseValue(r.key), "=", lease), clientv3.Compare(clientv3.Value(r.key), "=", r.value)).
		Else(clientv3.OpPut(r.key, r.value, clientv3.WithLease(lease))).
		Commit()
	if err != nil {
		return fmt.Errorf("rpcd: etcd put %s: %w", r.key, err)
	}
	return nil
}

// keep drains the keep-alive responses and, when etcd has not renewed the
// lease within its TTL, renews it or registers again as soon as etcd
// answers, until ctx ends or the etcd client is closed. It watches the
// registration's key too, from rev, the first put's revision, so that no
// change is missed while the watch starts, and puts the key back if
// someone deletes it while the lease lives.
func (r *Registration) keep(ctx context.Context, alive <-chan *clientv3.LeaseKeepAliveResponse, rev int64) {
	defer close(r.done)
	closed := r.cli.Ctx().Done() // the etcd client was closed under the registration
	own := r.cli.Watch(ctx, r.key, clientv3.WithRev(rev+1))
	for {
		answered := time.Now()
	drain:
		for {
			select {
			case _, ok := <-alive:
				if !ok { // no answer from etcd within the TTL, or the lease is gone
					break drain
				}
				answered = time.Now()
			case w, ok := <-own:
				if !ok {
					own = nil // the watch ended with the client: closed says so
					continue
				}
				for _, ev := range w.Events {
					if ev.Type == clientv3.EventTypeDelete {
						r.restore(ctx)
						break
					}
				}
			case <-ctx.Done():
				return
			case <-closed:
				return
			}
		}
		lost := time.Now()
		if silent := lost.Sub(answered); silent >= r.ttl*9/10 { // the keep-alive gave up at the TTL
			r.log.Warn("rpcd: etcd has not renewed the lease within its TTL; renewing it as soon as etcd answers", "key", r.key, "ttl", r.ttl.String(), "silent", silent.Round(time.Millisecond).String())
		} else { // etcd answered that the lease is gone: revoked, or expired while this node was cut off
			r.log.Warn("rpcd: etcd ended the lease; registering again", "key", r.key, "ttl", r.ttl.String(), "silent", silent.Round(time.Millisecond).String())
		}
		for attempt := 0; ; attempt++ {
			a, fresh, err := r.renew(ctx)
			if err == nil {
				alive = a
				r.mu.Lock()
				lease := r.lease
				r.mu.Unlock()
				if fresh {
					r.log.Info("rpcd: registered again", "key", r.key, "lease", fmt.Sprintf("%x", int64(lease)), "after", time.Since(lost).Round(time.Millisecond).String())
				} else {
					r.log.Info("rpcd: etcd registration kept", "key", r.key, "lease", fmt.Sprintf("%x", int64(lease)), "after", time.Since(lost).Round(time.Millisecond).String())
				}
				break
			}
			if ctx.Err() != nil || r.cli.Ctx().Err() != nil {
				return
			}
			// The first failure, then about one in every five to ten seconds.
			if attempt%5 == 0 {
				r.log.Warn("rpcd: etcd registration not renewed yet", "key", r.key, "attempt", attempt+1, "err", err)
			}
			select {
			case <-time.After(min(100*time.Millisecond<<min(attempt, 4), renewWaitMax)):
			case <-ctx.Done():
				return
			case <-closed:
				return
			}
		}
	}
}

// restore puts the registration's key back under its lease after someone
// deleted it. With the lease gone too (revoked), it cannot: the keep-alive
// then ends, and keep registers again.
func (r *Registration) restore(ctx context.Context) {
	r.mu.Lock()
	lease := r.lease
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, renewAttempt)
	defer cancel()
	if err := r.ensure(ctx, lease); err != nil {
		r.log.Info("rpcd: etcd key deleted; not put back under its lease", "key", r.key, "err", err)
		return
	}
	r.log.Info("rpcd: etcd key deleted while its lease lives; put back", "key", r.key)
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
