// Package clientmetrics counts the calls rpcd's client sends, by route, in
// a metrics.Metrics made by metrics.NewClient: the metrics package's
// server middleware, on the client's side. It is a package of its own so
// that a server that counts its calls does not import the client.
package clientmetrics

import (
	"context"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/metrics"
)

// Interceptor returns a client.Interceptor that counts in m each call a
// client sends: its outcome code, its latency, and that it is in flight.
// Install it first among a client's interceptors to count what the others
// answer or refuse. It allocates nothing and takes no lock once a route
// has been seen.
func Interceptor(m *metrics.Metrics) client.Interceptor {
	return func(ctx context.Context, info *client.CallInfo, req, reply []byte, next client.Invoker) ([]byte, error) {
		c := m.Counter(info.Route)
		start := c.Start()
		out, err := next(ctx, req, reply)
		c.Done(start, handler.CodeOf(err))
		return out, err
	}
}
