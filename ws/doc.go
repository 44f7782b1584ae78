// Package ws carries rpcd's protocol over WebSocket (RFC 6455), so that a
// browser is a client like any other: docs/protocol.md, "WebSocket".
//
// A WebSocket connection asks for the subprotocol "rpcd" and carries one
// frame in each binary message, both ways; everything else is the protocol
// as on TCP: the Hello and authentication, calls, cancels, deadlines, the
// server's calls and pushes, publish/subscribe, streams, the limits and
// the drain. Handler takes such connections for a server (reactor.Server's
// ServeConn serves each on its standard library transport, as it serves
// TLS); `rpcd serve -gateway ADDR` mounts it at /ws on the gateway's
// listener. Dial opens one for a client: rpcd's client takes it as its
// client.Options.Dial.
package ws
