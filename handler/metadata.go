package handler

import (
	"context"

	"github.com/rpcd/rpcd/proto"
)

type metadataKey struct{}

// WithMetadata returns a context whose calls carry the key/value pair in
// their metadata, after any pairs ctx already carries: the calls of rpcd's
// client, and a server's calls to its client through Call.Peer. Keys are 1
// to 255 bytes of printable ASCII; WithMetadata panics on others.
func WithMetadata(ctx context.Context, key, value string) context.Context {
	md := OutgoingMetadata(ctx)
	md = proto.AppendMetadata(append(proto.Metadata(nil), md...), key, []byte(value))
	return context.WithValue(ctx, metadataKey{}, md)
}

// OutgoingMetadata returns the metadata WithMetadata put in ctx for the
// calls made with it; nil if none.
func OutgoingMetadata(ctx context.Context) proto.Metadata {
	md, _ := ctx.Value(metadataKey{}).(proto.Metadata)
	return md
}
