package main

import (
	"flag"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/proto"
)

// compressFlag is -compress, for the commands that call a server.
type compressFlag struct{ name string }

func (f *compressFlag) define(fs *flag.FlagSet) {
	fs.StringVar(&f.name, "compress", "", "compress calls' payloads of 1 KiB or more in `zstd` or gzip, and ask for replies compressed so, where the server takes it (docs/protocol.md, \"Compression\"); empty or none sends them as they are")
}

// apply sets the client's compression; an unknown name is a usage error.
func (f *compressFlag) apply(o *client.Options) error {
	c, ok := proto.ParseCompression(f.name)
	if !ok {
		return usagef("-compress is %q, want zstd, gzip or none", f.name)
	}
	o.Compression = c
	return nil
}
