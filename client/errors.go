package client

import (
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/proto"
)

// ErrClosed is returned by calls on a Client after Close. It matches
// handler.ErrUnavailable. Like every error a call returns, it is marked
// transport.Received.
var ErrClosed = transport.Received(&handler.Error{Code: proto.CodeUnavailable, Message: "client closed", Unprocessed: true})

// errNoConn is returned when no connection is up to carry a call.
func errNoConn(addr string) error {
	return &handler.Error{Code: proto.CodeUnavailable, Message: "no connection to " + addr, Unprocessed: true}
}
