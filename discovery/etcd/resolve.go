package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rpcd/rpcd/client"
)

// Resolver follows services in etcd: it is the client.Resolver of
// "etcd://" targets, and may be given to client.DialService as
// ServiceOptions.Resolver to share one etcd client among several services.
type Resolver struct {
	cli      *clientv3.Client
	own      bool     // built for a target: Close closes cli
	answered sync.Map // prefix -> struct{}: etcd has answered a read of it
}

// NewResolver returns a Resolver reading services through cli, which stays
// the caller's to close.
func NewResolver(cli *clientv3.Client) *Resolver { return &Resolver{cli: cli} }

// Close closes the etcd client if the Resolver made it (for an "etcd://"
// target); a Resolver from NewResolver leaves it open.
func (r *Resolver) Close() error {
	if r.own {
		return r.cli.Close()
	}
	return nil
}

// LastError says, of a service whose nodes etcd has not yet answered a
// read for, that it has not, and what commonly keeps it from answering;
// nil once it has: for client.DialService's error. (The etcd client retries
// a failed connection quietly, and its reads wait: there is no error of
// its own to give.)
func (r *Resolver) LastError(service string) error {
	if _, ok := r.answered.Load(Prefix + service + "/"); ok {
		return nil
	}
	return fmt.Errorf("etcd at %s has not answered: is it reachable, and does it want TLS, a client certificate or a user (etcd.Config; rpcd's -etcd-tls, -etcd-cacert, -etcd-cert, -etcd-key, -etcd-user)?", strings.Join(r.cli.Endpoints(), ","))
}

// retryWait is how long Watch waits before reading the service again after
// etcd failed it.
const retryWait = 500 * time.Millisecond

// Watch sends the nodes of service as soon as etcd answers, and again
// after each change, until ctx ends. It returns at once: the caller bounds
// the wait for the first set (client.DialService by its context). Once
// read, the set stays in use while etcd is unreachable, and is read afresh
// when it answers again. A key whose value is not a node is skipped.
func (r *Resolver) Watch(ctx context.Context, service string) (<-chan []client.Node, error) {
	if service == "" || strings.Contains(service, "/") {
		return nil, fmt.Errorf("rpcd: bad service name %q", service)
	}
	out := make(chan []client.Node, 1)
	go r.follow(ctx, Prefix+service+"/", out)
	return out, nil
}

// read returns the nodes under prefix and the revision they were read at.
func (r *Resolver) read(ctx context.Context, prefix string) (map[string]client.Node, int64, error) {
	resp, err := r.cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, err
	}
	nodes := make(map[string]client.Node, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if n, ok := decode(kv); ok {
			nodes[string(kv.Key)] = n
		}
	}
	return nodes, resp.Header.Revision, nil
}

// follow reads the nodes under prefix, sends them, and watches for
// changes from the revision read, sending the whole set on each; when the
// watch fails (a compacted revision, a lost leader, etcd unreachable) it
// reads the set afresh once etcd answers.
func (r *Resolver) follow(ctx context.Context, prefix string, out chan []client.Node) {
	defer close(out)
	for ctx.Err() == nil {
		nodes, rev, err := r.read(ctx, prefix)
		if err == nil {
			r.answered.Store(prefix, struct{}{})
		}
		if err != nil {
			select {
			case <-time.After(retryWait):
			case <-ctx.Done():
			}
			continue
		}
		if !send(ctx, out, list(nodes)) {
			return
		}
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for resp := range r.cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
			if resp.Err() != nil {
				break
			}
			for _, ev := range resp.Events {
				key := string(ev.Kv.Key)
				switch ev.Type {
				case clientv3.EventTypePut:
					if n, ok := decode(ev.Kv); ok {
						nodes[key] = n
					} else {
						delete(nodes, key)
					}
				case clientv3.EventTypeDelete:
					delete(nodes, key)
				}
			}
			if !send(ctx, out, list(nodes)) {
				break
			}
		}
		cancel()
	}
}

// send delivers nodes, replacing a set not yet taken, unless ctx ends.
func send(ctx context.Context, out chan []client.Node, nodes []client.Node) bool {
	select {
	case <-out: // the consumer wants the latest set only
	default:
	}
	select {
	case out <- nodes:
		return true
	case <-ctx.Done():
		return false
	}
}

// decode returns the node kv lists, its Instance the key's lease: a node
// that registers afresh (a restart, a lease lost) has a new one.
func decode(kv *mvccpb.KeyValue) (client.Node, bool) {
	var n client.Node
	if err := json.Unmarshal(kv.Value, &n); err != nil || n.Addr == "" {
		return n, false
	}
	n.Instance = strconv.FormatInt(kv.Lease, 16)
	return n, true
}

// list returns the nodes in key order.
func list(nodes map[string]client.Node) []client.Node {
	out := make([]client.Node, 0, len(nodes))
	for _, k := range slices.Sorted(maps.Keys(nodes)) {
		out = append(out, nodes[k])
	}
	return out
}
