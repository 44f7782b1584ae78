package main

import (
	"flag"
	"fmt"

	"github.com/rpcd/rpcd/internal/buildinfo"
)

var versionCmd = &command{
	name:     "version",
	synopsis: "",
	summary:  "print which rpcd this is: version, revision, Go release",
	about: `Version prints one line of the rpcd module's version, the revision of the
source it was built from, and the Go release that built it, as key=value
pairs with the names and values of the labels of the rpcd_build_info metric
that "rpcd serve -admin" exports (docs/operating.md): a binary built from a
checkout is version (devel), and its revision is what go build recorded
(unknown with -buildvcs=false); "go install ...@v1.2.0" gives v1.2.0, and
"...@COMMIT" a pseudo-version whose last part is the revision. "rpcd
-version" and "rpcd --version" are the same.`,
	example: `rpcd version    # rpcd version=v1.2.0 revision=unknown go_version=go1.26.0`,
	setup:   setupVersion,
}

func setupVersion(*flag.FlagSet) func(*cli, []string) error {
	return func(c *cli, args []string) error {
		fmt.Fprintln(c.stdout, buildinfo.Read())
		return nil
	}
}
