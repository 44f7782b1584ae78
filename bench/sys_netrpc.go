package main

import (
	"context"
	"errors"
	"net"
	"net/rpc"
	"sync"
)

// netrpcSystem is Go's standard net/rpc with its default gob codec: a method
// taking and returning a struct holding a []byte, one rpc.Client per
// connection (an rpc.Client multiplexes concurrent calls by sequence number),
// caller w on client w % n.
type netrpcSystem struct{}

func init() { register(netrpcSystem{}) }

func (netrpcSystem) name() string { return "netrpc" }

// EchoArgs is both the argument and the reply of Echo.Echo.
type EchoArgs struct{ Data []byte }

// NetRPCEcho is the net/rpc service (net/rpc wants exported names).
type NetRPCEcho struct{}

// Echo returns its argument.
func (NetRPCEcho) Echo(args *EchoArgs, reply *EchoArgs) error {
	reply.Data = args.Data
	return nil
}

func (netrpcSystem) serve(addr string) (func(), string, error) {
	srv := rpc.NewServer()
	if err := srv.RegisterName("Echo", NetRPCEcho{}); err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	var (
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			go func() {
				srv.ServeConn(c) // what rpc.Server.Accept does, but tracked so stop can close it
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
			}()
		}
	}()
	stop := func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	}
	return stop, ln.Addr().String(), nil
}

func (netrpcSystem) dial(addr string, conns int) (caller, error) {
	n := &netrpcCaller{}
	for range conns {
		c, err := rpc.Dial("tcp", addr)
		if err != nil {
			n.close()
			return nil, err
		}
		n.clients = append(n.clients, c)
	}
	return n, nil
}

type netrpcCaller struct{ clients []*rpc.Client }

func (n *netrpcCaller) call(ctx context.Context, worker int, req, reply []byte) ([]byte, error) {
	args := EchoArgs{Data: req}
	out := &EchoArgs{Data: reply[:0]} // gob decodes into it, reusing its capacity
	// Go, not Call (which is Go plus a wait), so that the end of a run does
	// not wait for a reply that never comes.
	c := n.clients[connIndex(worker, len(n.clients))].Go("Echo.Echo", &args, out, make(chan *rpc.Call, 1))
	select {
	case <-c.Done:
		return out.Data, c.Error
	case <-ctx.Done():
		return reply, ctx.Err()
	}
}

func (n *netrpcCaller) close() error {
	var errs []error
	for _, c := range n.clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
