package reactor

import (
	"errors"
	"time"

	"github.com/rpcd/rpcd/compression"
	"github.com/rpcd/rpcd/proto"
)

// Compression (docs/protocol.md, "Compression"): a client names the
// compressions it takes in its Hello, the server answers with its own in
// the Welcome and from then on compresses the connection's replies of
// Options.CompressMin bytes or more in the first of the client's it does.
// A compressed call is expanded before its route runs, into a pooled
// buffer, so handlers never see the difference.

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
	return proto.AppendWelcome(out, identity, compression.Supported...)
}

// handleCompressed runs a call whose payload is compressed: expanded, up
// to the frame limit, it goes on as any call; one that does not expand is
// refused, as arguments that do not decode are.
func (c *conn) handleCompressed(f *proto.Frame, out []byte, now time.Time) []byte {
	bp := compression.GetBuffer()
	payload, err := compression.Expand(*bp, f.Payload, f.Flags.Compression(), f.PayloadRoom(c.s.opts.Limits.MaxFrameSize))
	if err != nil {
		compression.PutBuffer(bp, payload)
		c.tookIn(f.ID)
		code := proto.CodeInvalidArgument
		if errors.Is(err, compression.ErrTooLarge) {
			code = proto.CodeResourceExhausted
		}
		return c.refuse(out, f, code, err.Error())
	}
	g := *f
	g.Flags, g.Payload = g.Flags.WithCompression(proto.CompressionNone), payload
	out = c.handleCall(&g, out, now) // a Blocking route's task copies the payload
	compression.PutBuffer(bp, payload)
	return out
}

// compressReply compresses the payload of the Response begun at
// out[start:], with own's bytes after it, if it is large enough and
// shrinks; it returns out and what is left of own to write after it.
func (c *conn) compressReply(out []byte, start int, own []byte) ([]byte, []byte) {
	at := start + proto.HeaderSize // a Response has no route or metadata
	if len(out)-at+len(own) < c.s.opts.CompressMin {
		return out, own
	}
	if own != nil {
		out, own = append(out, own...), nil
	}
	bp := compression.GetBuffer()
	z := compression.Append(*bp, out[at:], c.zip)
	if len(z) < len(out)-at {
		out = append(out[:at], z...)
		proto.SetCompression(out[start:], c.zip)
	}
	compression.PutBuffer(bp, z)
	return out, nil
}
