package main

import (
	"context"
	"flag"
	"strings"

	"github.com/rpcd/rpcd/gen"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/handler/schema"
)

var describeCmd = &command{
	name:     "describe",
	synopsis: "[flags] [ROUTE]",
	summary:  "print what a server's routes take and answer",
	about: `Describe calls ` + builtin.Describe + ` on the server at -addr and prints what ROUTE, or
every route, takes and answers, as grpcurl's describe does for gRPC: the
route and its kind, "typed", "raw" (bytes in, bytes out, in the request's
codec) or "stream" (bytes both ways), with "blocking" or "inline" as
"rpcd routes" notes them, then a typed route's argument and reply in a
Go-like form, from the JSON Schemas the server derived from its Go types:
"int64", "[]string", "*T", "map[string]T", "struct { name type }" (a
named struct with its Go name instead of "struct"; a reply's field that
may be left out marked "// omitempty"), "any", "string (date-time)",
"[]byte" for base64. A recursive type is named where it is used and
written out below. -json prints the descriptions as the server sent them:
an array of {"name", "kind", "blocking", "inline", "argument", "reply"},
the last two JSON Schemas (docs/protocol.md, "Route descriptions"). An
unknown ROUTE prints "rpcd: not found: no route ROUTE" and exits 1.`,
	example: `rpcd describe Math/Sum
rpcd describe -addr 10.0.0.7:7070
rpcd describe -json Sys/Routes`,
	setup: setupDescribe,
	args:  true,
}

// describeFlags are describe's flags.
type describeFlags struct {
	dialFlags
	json bool
}

// setupDescribe defines describe's flags; see command.setup.
func setupDescribe(fs *flag.FlagSet) func(*cli, []string) error {
	f := &describeFlags{}
	f.define(fs)
	fs.BoolVar(&f.json, "json", false, "print the descriptions as the server sent them, JSON Schemas and all")
	return func(c *cli, args []string) error { return c.describe(f, args) }
}

func (c *cli) describe(f *describeFlags, args []string) error {
	if len(args) > 1 {
		return usagef("want at most one ROUTE, got %d arguments", len(args))
	}
	if err := f.check(); err != nil {
		return err
	}
	route := ""
	if len(args) == 1 {
		if err := handler.ValidRoute(args[0]); err != nil {
			return usagef("%v", strings.TrimPrefix(err.Error(), "rpcd: "))
		}
		route = args[0]
	}
	reply, err := c.fetch(&f.dialFlags, route)
	if err != nil {
		return err
	}
	if f.json {
		return c.write(append(reply, '\n'))
	}
	text, err := schema.RenderJSON(reply)
	if err != nil {
		return err
	}
	return c.write([]byte(text))
}

// fetch returns the server's descriptions of route (all routes if empty),
// as it sent them.
func (c *cli) fetch(f *dialFlags, route string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	cl, err := c.dial(ctx, f)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return gen.Fetch(ctx, cl, route)
}
