package builtin

import (
	"context"

	"github.com/rpcd/rpcd/handler"
)

// Health is the route HandleHealth registers: a server's status for the
// active health checks of clients (client.HealthCheck) and for load
// balancers, as gRPC's health service gives it.
const Health = "Sys/Health"

// The replies of Sys/Health, JSON strings.
const (
	Serving    = `"SERVING"`
	NotServing = `"NOT_SERVING"`
)

// HandleHealth registers Sys/Health on reg: it answers Serving while
// serving reports true, and NotServing once it reports false (rpcd serve's
// from the moment it begins to drain). It is raw, so it answers in any
// codec, and runs inline: serving must not block.
func HandleHealth(reg *handler.Registry, serving func() bool) {
	reg.HandleFunc(Health, func(_ context.Context, _, reply []byte) ([]byte, error) {
		if serving() {
			return append(reply, Serving...), nil
		}
		return append(reply, NotServing...), nil
	})
}
