package reactor

import (
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/proto"
)

// Compression (docs/protocol.md, "Compression"): a client names the
// compressions it takes in its Hello, the server answers with its own in
// the Welcome and from then on compresses the connection's replies of
// Options.CompressMin bytes or more in the first of the client's it does.
// A compressed call is expanded before its route runs, into a pooled
// buffer, so handlers never see the difference: on the event loop for an
// inline route, on the pool for a Blocking one, where its reply is
// compressed too (in the compression its task took from the connection
// when it was dispatched: the pool never reads conn.zip).

// welcome answers the Hello hello with the identity, and settles the
// connection's compression from what the Hello names.
func (c *conn) welcome(out []byte, hello *proto.Frame, identity string) []byte {
	takes, ok := hello.Metadata.Get(proto.MetaCompression)
	if !ok || c.s.opts.CompressMin < 0 {
		return proto.AppendWelcome(out, identity)
	}
	if cs := proto.ParseCompressionList(takes); len(cs) > 0 {
		c.zip = cs[0] // every compression the list parses to is one the server does
	}
	return proto.AppendWelcome(out, identity, compression.Supported()...)
}

// compressReply compresses the payload of the Response begun at
// out[start:], with own's bytes after it, with zip if it is large enough
// and shrinks; it returns out and what is left of own to write after it.
// It is the runner's Compress (transport.Runner): an inline call's Job
// carries the connection's zip, a pooled call's the zip its task was
// given (the pool never reads conn.zip, which is the loop's).
func (s *Server) compressReply(out []byte, start int, own []byte, zip proto.Compression) ([]byte, []byte) {
	at := start + proto.HeaderSize // a Response has no route or metadata
	if len(out)-at+len(own) < s.opts.CompressMin {
		return out, own
	}
	if own != nil {
		out, own = append(out, own...), nil
	}
	bp := compression.GetBuffer()
	z := compression.Append(*bp, out[at:], zip)
	if len(z) < len(out)-at {
		out = append(out[:at], z...)
		proto.SetCompression(out[start:], zip)
	}
	compression.PutBuffer(bp, z)
	return out, nil
}
