package client

import (
	"context"

	"github.com/rpcd/rpcd/handler"
)

// WithMetadata returns a context whose calls carry the key/value pair in
// their metadata, after any pairs ctx already carries: handler.WithMetadata,
// which a server's calls to its client (handler.Call.Peer) read too. Keys
// are 1 to 255 bytes of printable ASCII; WithMetadata panics on others.
func WithMetadata(ctx context.Context, key, value string) context.Context {
	return handler.WithMetadata(ctx, key, value)
}
