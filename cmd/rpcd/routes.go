package main

import (
	"context"
	"flag"
	"strings"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
)

var routesCmd = &command{
	name:     "routes",
	synopsis: "[flags]",
	summary:  "list the routes a server has",
	about: `Routes calls ` + builtin.Routes + ` on the server at -addr and prints one route per
line, in the order the server returns them, with notes in parentheses:
"blocking" for the routes that run on the server's blocking pool, "moved
from the event loop" for those of them that moved there because their inline
runs kept passing their budget, "pinned inline" for routes registered with
handler.Inline, "N inline overruns" for routes the watchdog caught holding
their event loop, and "stream" for stream routes.`,
	example: `rpcd routes -addr 127.0.0.1:7070`,
	setup:   setupRoutes,
}

// setupRoutes defines routes's flags; see command.setup.
func setupRoutes(fs *flag.FlagSet) func(*cli, []string) error {
	f := &dialFlags{}
	f.define(fs)
	return func(c *cli, args []string) error { return c.routes(f, args) }
}

func (c *cli) routes(f *dialFlags, args []string) error {
	if err := f.check(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	cl, err := c.dial(ctx, f)
	if err != nil {
		return err
	}
	defer cl.Close()

	var routes []handler.RouteInfo
	if err := cl.Call(ctx, builtin.Routes, nil, &routes); err != nil {
		return err
	}
	var b strings.Builder
	for _, r := range routes {
		b.WriteString(r.Name)
		if notes := r.Notes(); len(notes) > 0 {
			b.WriteString(" (" + strings.Join(notes, ", ") + ")")
		}
		b.WriteByte('\n')
	}
	return c.write([]byte(b.String()))
}
