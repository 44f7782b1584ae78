package handler

import "context"

// Peer is the other end of a connection, seen from a handler: the client
// a server's handler serves, or the server a client's handler was called
// by. Calls made through it go the other way on the same connection (on a
// client, on one of its connections to the same server), with the same
// frames, codes and deadlines as any call. *client.Client is a Peer, and
// so is the handle a server gives its handlers in Call.Peer.
//
// Call and CallRaw wait for the reply. A handler that runs inline on a
// server's event loop must not wait (the reply can only arrive through the
// loop it would block), so there they fail at once with FailedPrecondition;
// Notify and NotifyRaw, which never wait, work everywhere. Register the
// route with Blocking to call and await the peer from its handler.
type Peer interface {
	// Call sends in, encoded in the codec its side is configured with
	// (JSON unless client.Options.Codec or reactor.Options.Codec names
	// another), and decodes the reply into out (nil to drop it).
	Call(ctx context.Context, route string, in, out any) error

	// CallRaw sends req with the raw codec and appends the reply to
	// reply.
	CallRaw(ctx context.Context, route string, req, reply []byte) ([]byte, error)

	// Notify sends in, encoded as Call's is, in a one-way message: no
	// reply, no waiting for the peer.
	Notify(ctx context.Context, route string, in any) error

	// NotifyRaw sends req with the raw codec in a one-way message.
	NotifyRaw(ctx context.Context, route string, req []byte) error
}
