package handler

import "context"

// Method is a typed route named with the types of its argument and its
// reply, so that the server that serves it and the clients that call it
// are checked by the compiler against one declaration, kept in a package
// both import: the Go form of a service interface shared by both ends.
//
//	var Sum = handler.Method[SumArgs, int64]("Math/Sum")
//
//	Sum.Handle(reg, func(ctx context.Context, in SumArgs) (int64, error) { // the server
//		return in.A + in.B, nil
//	})
//	n, err := Sum.Call(ctx, c, SumArgs{A: 1, B: 2}) // a client: *client.Client, *client.Cluster, or a Peer
//
// It is Registry.Handle with Func, and Call with a reply of type Out: the
// calls on the wire are the same.
type Method[In, Out any] string

// Route returns the method's route.
func (m Method[In, Out]) Route() string { return string(m) }

// Handle registers fn as the method's handler in reg, as
// reg.Handle(m.Route(), Func(fn), opts...) does.
func (m Method[In, Out]) Handle(reg *Registry, fn func(ctx context.Context, in In) (Out, error), opts ...RouteOption) {
	reg.Handle(string(m), Func(fn), opts...)
}

// Caller is what Method.Call calls through: a *client.Client, a
// *client.Cluster, or a server's Peer.
type Caller interface {
	Call(ctx context.Context, route string, in, out any) error
}

// Call calls the method on c with in and returns its reply.
func (m Method[In, Out]) Call(ctx context.Context, c Caller, in In) (Out, error) {
	var out Out
	err := c.Call(ctx, string(m), in, &out)
	return out, err
}
