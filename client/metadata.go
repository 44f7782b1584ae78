package client

import (
	"context"

	"github.com/rpcd/rpcd/proto"
)

type mdKey struct{}

// WithMetadata returns a context whose calls carry the key/value pair in
// their metadata, after any pairs ctx already carries. Keys are 1 to 255
// bytes of printable ASCII; WithMetadata panics on others.
func WithMetadata(ctx context.Context, key, value string) context.Context {
	md := metadataFrom(ctx)
	md = proto.AppendMetadata(append(proto.Metadata(nil), md...), key, []byte(value))
	return context.WithValue(ctx, mdKey{}, md)
}

func metadataFrom(ctx context.Context) proto.Metadata {
	md, _ := ctx.Value(mdKey{}).(proto.Metadata)
	return md
}
