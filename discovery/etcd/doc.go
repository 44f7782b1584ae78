// Package etcd keeps an rpcd service's nodes in etcd: Register puts a
// server's address, weight, routes and metadata under a lease it keeps
// alive, and Resolver, a client.Resolver, follows them, so that
// client.DialService spreads calls over the live nodes.
//
// A node of service NAME is the key Prefix+NAME+"/"+ADDR, whose value is
// the client.Node as JSON:
//
//	/rpcd/services/echo/10.0.0.7:7070  {"addr":"10.0.0.7:7070","weight":2,"routes":["Echo/Say"],"meta":{"zone":"a"}}
//
// The key lives as long as its lease: a node that stops cleanly revokes it
// (Registration.Deregister) before it stops taking calls; a node that dies
// leaves it until the lease's TTL runs out. Importing the package
// registers the "etcd" scheme with client.RegisterScheme, so that
//
//	client.DialService(ctx, "etcd://127.0.0.1:2379,127.0.0.1:22379/echo", opts)
//
// works. An etcd that serves TLS, asks for client certificates or has
// authentication on is reached with a Config (TLSFiles builds its TLS from
// the files etcdctl takes): Connect gives the etcd client for Register and
// NewResolver, and RegisterScheme("etcd", cfg) makes "etcd://" targets use
// it. Only this package imports the etcd client; package client does
// not, and a program that never imports it does not link it.
package etcd
