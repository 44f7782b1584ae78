package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/rpcd/rpcd/gen"
)

var genCmd = &command{
	name:     "gen",
	synopsis: "ts|python|go [flags]",
	summary:  "write a typed client from a server's route descriptions",
	about: `Gen writes typed code for the routes of the server at -addr, or of a file -in
saved by "rpcd describe -json" ("-": standard input): ts and python, facades over
clients/ts and clients/python; go, handler.Method declarations (docs/gen.md).`,
	example: "rpcd gen ts -o src/api.ts\nrpcd gen go -in routes.json -package orders -o orders/api.go",
	setup:   setupGen,
	args:    true,
}

// setupGen defines gen's flags, which follow the language (command.setup).
func setupGen(fs *flag.FlagSet) func(*cli, []string) error {
	f, o := &dialFlags{}, gen.Options{}
	f.define(fs)
	in := fs.String("in", "", "read the descriptions from this `file` (- for standard input), not from -addr")
	out := fs.String("o", "", "write to this `file`, not to standard output")
	fs.StringVar(&o.Package, "package", "api", "go: the package's `name`")
	fs.StringVar(&o.Import, "import", "@rpcd/client", "ts: the `module` the client's types come from")
	return func(c *cli, args []string) error {
		if len(args) == 0 || gen.Languages[args[0]] == nil {
			return usagef("want a language first: ts, python or go")
		}
		if fs.SetOutput(io.Discard); fs.Parse(args[1:]) != nil || fs.NArg() > 0 {
			return usagef("after %s: %v", args[0], args[1:])
		}
		if err := f.check(); err != nil {
			return err
		}
		b, err := []byte(nil), error(nil)
		switch *in {
		case "":
			b, err = c.fetch(f, "")
		case "-":
			b, err = io.ReadAll(c.stdin)
		default:
			if b, err = os.ReadFile(*in); err != nil {
				err = fmt.Errorf("rpcd: -in: %w", err)
			}
		}
		if err == nil {
			b, err = gen.Generate(args[0], b, o)
		}
		if err != nil || *out == "" {
			return errors.Join(err, c.write(b))
		}
		return os.WriteFile(*out, b, 0o644)
	}
}
