package client

import (
	"context"

	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/proto"
)

// Payloads already encoded: the raw calls send bytes as they are, labelled
// proto.CodecRaw; these send them labelled with the codec they were encoded
// with, so that a typed route decodes them, as a replay of recorded calls
// (package load) sends what was recorded. The client neither checks nor
// converts the bytes, and the reply comes as the server encoded it.

// CallEncodedAsync is CallRawAsync for a request payload already encoded
// with codec (proto.CodecJSON, or an application's id): the frame says
// codec rather than raw.
func (c *Client) CallEncodedAsync(ctx context.Context, codec proto.Codec, route string, req, reply []byte, done func(reply []byte, err error)) {
	c.callEncodedAsync(ctx, codec, route, req, reply, done)
}

// NotifyEncoded is NotifyRaw for a payload already encoded with codec.
func (c *Client) NotifyEncoded(ctx context.Context, codec proto.Codec, route string, req []byte) error {
	return transport.Received(notifyRaw(ctx, c, codec, route, req))
}

// PublishEncoded is PublishRaw for a payload already encoded with codec:
// subscribers see it in Message.Codec.
func (c *Client) PublishEncoded(ctx context.Context, topic string, codec proto.Codec, payload []byte) error {
	return transport.Received(c.publish(ctx, topic, codec, payload))
}
