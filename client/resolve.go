package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Node is one server of a service, as a Resolver reports it.
type Node struct {
	// Addr is the address clients dial: host:port, or unix:///path.
	Addr string `json:"addr"`
	// Weight is the node's share of calls relative to the others';
	// 0 means 1. Weights above MaxWeight count as MaxWeight.
	Weight int `json:"weight,omitempty"`
	// Routes are the routes the node serves: a Cluster sends a call only
	// to nodes whose Routes name its route, as long as one can take it.
	// Empty means every route (a node that publishes none, as from DNS or
	// Static).
	Routes []string `json:"routes,omitempty"`
	// Meta is free-form information about the node (version, ...). Its
	// key "zone" is the node's zone, for ServiceOptions.Zone.
	Meta map[string]string `json:"meta,omitempty"`
	// Instance tells one registration of the node from the next: a
	// Resolver sets it to what changes when a node registers afresh (for
	// etcd, the key's lease), and a Cluster takes a node whose Instance
	// changed for a new one, its breaker closed and its routes trusted
	// again. Empty when the resolver cannot tell. Not in the JSON.
	Instance string `json:"-"`
}

// ZoneKey is the key of Node.Meta that names the node's zone.
const ZoneKey = "zone"

// MaxWeight is the largest Node.Weight that counts.
const MaxWeight = 100

// weight is n's weight within 1..MaxWeight.
func (n Node) weight() int { return min(max(n.Weight, 1), MaxWeight) }

// Resolver finds the nodes of a service and follows their changes. Package
// discovery/etcd implements it over etcd, discovery/dns over DNS; Static is
// a fixed list. A Resolver may also have a method LastError(service string)
// error, saying why it has sent no set of service yet: DialService puts its
// answer in the error it returns when its context ends before a set came.
type Resolver interface {
	// Watch returns at once a channel on which it sends the service's
	// whole set of nodes, as soon as it knows it and again after each
	// change, until ctx ends; then it closes the channel. An error means
	// the service cannot be watched at all. A resolver that loses its
	// source for a while keeps quiet rather than sending an empty set.
	Watch(ctx context.Context, service string) (<-chan []Node, error)
}

// lastErrorer is what a Resolver implements to say why it has sent no set
// of a service yet (a lookup's "no such host", a registry that does not
// answer): DialService puts it in the error it returns when its context
// ends first, beside the context's own.
type lastErrorer interface {
	LastError(service string) error
}

// Static returns a Resolver whose every service is the fixed set of nodes:
// for tests, and for users who list their servers themselves.
func Static(nodes ...Node) Resolver { return static(nodes) }

type static []Node

func (s static) Watch(ctx context.Context, service string) (<-chan []Node, error) {
	ch := make(chan []Node, 1)
	ch <- append([]Node(nil), s...)
	go func() {
		<-ctx.Done()
		close(ch)
	}()
	return ch, nil
}

// SchemeBuilder builds the Resolver for a target "scheme://authority/NAME"
// from its authority (for etcd, its endpoints). A Resolver it returns that
// is also an io.Closer is closed with the Cluster.
type SchemeBuilder func(authority string) (Resolver, error)

var (
	schemesMu sync.RWMutex
	schemes   = map[string]SchemeBuilder{"static": buildStatic}
)

// RegisterScheme makes DialService accept targets "scheme://authority/NAME",
// resolved by the Resolver that build makes. Packages that implement a
// registry call it from init: importing discovery/etcd registers "etcd".
// Registering a scheme twice replaces the first.
func RegisterScheme(scheme string, build SchemeBuilder) {
	schemesMu.Lock()
	defer schemesMu.Unlock()
	schemes[scheme] = build
}

// buildStatic resolves "static://host:port,host:port/NAME": the listed
// addresses, each optionally with a weight as "host:port;w=3".
func buildStatic(authority string) (Resolver, error) {
	var nodes []Node
	for _, a := range strings.Split(authority, ",") {
		if a == "" {
			continue
		}
		n := Node{Addr: a}
		if addr, w, ok := strings.Cut(a, ";w="); ok {
			weight, err := strconv.Atoi(w)
			if err != nil || weight < 1 {
				return nil, fmt.Errorf("rpcd: bad weight in %q", a)
			}
			n = Node{Addr: addr, Weight: weight}
		}
		nodes = append(nodes, n)
	}
	if len(nodes) == 0 {
		return nil, errors.New("rpcd: static target lists no address")
	}
	return Static(nodes...), nil
}

// IsService reports whether addr names a service for DialService,
// "scheme://authority/NAME", rather than one server for Dial (host:port,
// tcp://host:port, unix:///path).
func IsService(addr string) bool {
	scheme, _, ok := strings.Cut(addr, "://")
	return ok && scheme != "unix" && scheme != "tcp"
}

// parseTarget splits "scheme://authority/NAME" into its parts.
func parseTarget(target string) (scheme, authority, name string, err error) {
	scheme, rest, ok := strings.Cut(target, "://")
	if !ok || scheme == "" {
		return "", "", "", fmt.Errorf("rpcd: service target %q is not scheme://authority/NAME", target)
	}
	authority, name, _ = strings.Cut(rest, "/")
	if name == "" || strings.Contains(name, "/") {
		return "", "", "", fmt.Errorf("rpcd: service target %q names no service (scheme://authority/NAME)", target)
	}
	return scheme, authority, name, nil
}

// resolverFor returns the Resolver for target's scheme.
func resolverFor(target string) (r Resolver, name string, err error) {
	scheme, authority, name, err := parseTarget(target)
	if err != nil {
		return nil, "", err
	}
	schemesMu.RLock()
	build, ok := schemes[scheme]
	schemesMu.RUnlock()
	if !ok {
		return nil, "", fmt.Errorf("rpcd: no resolver for scheme %q (import github.com/rpcd/rpcd/discovery/%s?)", scheme, scheme)
	}
	r, err = build(authority)
	if err != nil {
		return nil, "", err
	}
	return r, name, nil
}
