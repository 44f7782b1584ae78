package main

import (
	"flag"
	"fmt"
	"net"

	"github.com/rpcd/rpcd/record"
)

var recordCmd = &command{
	name:     "record",
	synopsis: "-listen ADDR -to ADDR -o FILE [flags] | -inspect FILE | -filter [flags] -o OUT FILE",
	summary:  "record a server's traffic through a proxy; inspect or filter a recording",
	about: `Record listens on -listen, forwards each connection to the server at -to
unchanged, and records its frames into a new file -o (mode 0600) until Ctrl-C,
-d or -max-bytes. -inspect summarises a recording; -filter writes a copy of
FILE without -drop's routes, with -set's and -replace's metadata (docs/recording.md).`,
	example: "rpcd record -listen 127.0.0.1:7071 -to 10.0.0.5:7070 -o traffic.rec -d 10m -answers\n" +
		"rpcd record -inspect traffic.rec\nrpcd record -filter -drop 'Sys/*' -replace 'backend=10.0.0.5:80=>127.0.0.1:80' -o test.rec traffic.rec",
	setup: setupRecord,
	args:  true,
}

// setupRecord defines record's flags (command.setup).
func setupRecord(fs *flag.FlagSet) func(*cli, []string) error {
	var o record.Options
	var f record.Filter
	listen, to := fs.String("listen", "", "proxy: listen on this `address`"), fs.String("to", "", "proxy: the server's `address`")
	out, inspect := fs.String("o", "", "the new recording's `file`"), fs.String("inspect", "", "summarise this recording `file`")
	filter := fs.Bool("filter", false, "copy the recording FILE to -o, changed by -drop, -set and -replace")
	fs.DurationVar(&o.Duration, "d", 0, "stop after this long (0: at Ctrl-C or -max-bytes)")
	fs.Int64Var(&o.MaxBytes, "max-bytes", record.DefaultMaxBytes, "stop before the file passes this many `bytes`")
	fs.Float64Var(&o.Sample, "sample", 1, "the `fraction` of connections recorded")
	fs.BoolVar(&o.Answers, "answers", false, "record the server's answers too (for rpcd bench -replay -compare)")
	fs.Func("route", "record only the routes this path.Match `pattern` matches (repeatable)", appendTo(&o.Routes, same))
	fs.Func("redact", "redact payloads by `rule`: ROUTE=keep, ROUTE=drop or ROUTE=replace:TEXT; the first that matches wins (repeatable)", appendTo(&o.Redact, record.ParseRedaction))
	fs.Func("drop", "-filter: leave out the routes this `pattern` matches (repeatable)", appendTo(&f.Drop, same))
	fs.Func("set", "-filter: give every call the metadata `pair` key=value (repeatable)", appendTo(&f.Set, record.ParseMetaValue))
	fs.Func("replace", "-filter: change a metadata `value`: key=old=>new (repeatable)", appendTo(&f.Replace, record.ParseMetaReplace))
	return func(c *cli, args []string) error {
		var s record.Stats
		var err error
		switch {
		case *inspect != "" && len(args) == 0 && *out == "":
			return record.Inspect(c.stdout, *inspect)
		case *filter && len(args) == 1 && *out != "":
			s, err = record.FilterFile(*out, args[0], f)
		case *listen != "" && *to != "" && *out != "" && len(args) == 0 && !*filter:
			ctx, stop := c.interruptible()
			defer stop()
			s, err = record.RunProxy(ctx, *listen, *to, *out, o, func(a net.Addr) {
				fmt.Fprintf(c.stderr, "rpcd record: recording %s through %s into %s\n", *to, a, *out)
			})
		default:
			return usagef("want -listen, -to and -o; -inspect FILE; or -filter -o OUT FILE")
		}
		if err == nil {
			_, err = fmt.Fprintln(c.stdout, s)
		}
		return err
	}
}

// appendTo returns a flag.Func that appends what parse makes of each value to dst.
func appendTo[T any](dst *[]T, parse func(string) (T, error)) func(string) error {
	return func(s string) error { v, err := parse(s); *dst = append(*dst, v); return err }
}

func same(s string) (string, error) { return s, nil }
