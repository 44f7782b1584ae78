package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	rpcdaemon "github.com/rpcd/rpcd/daemon"
)

var healthCmd = &command{
	name:     "health",
	synopsis: "[-admin ADDR] [-timeout 2s]",
	summary:  "check that a server is ready, through its admin listener (/readyz)",
	about: `Health asks the admin listener of "rpcd serve -admin ADDR" whether the
server is ready (GET /readyz) and exits 0 if it answers 200, printing its
answer; 1 if it answers otherwise (503 before it serves and from the moment
it begins to drain) or cannot be reached, printing why. It is the health
check of a container, whose image has no shell or curl (the Dockerfile's
HEALTHCHECK). Without -admin it asks $RPCD_ADMIN, the admin address serve
takes from the environment, with 0.0.0.0 or :: as loopback; failing that,
127.0.0.1:7071.`,
	example: `rpcd health -admin 127.0.0.1:7071`,
	setup:   setupHealth,
}

// defaultAdmin is where health asks when neither -admin nor $RPCD_ADMIN
// says.
const defaultAdmin = "127.0.0.1:7071"

func setupHealth(fs *flag.FlagSet) func(*cli, []string) error {
	addr := fs.String("admin", "", "the admin listener's `address`; default $RPCD_ADMIN, else "+defaultAdmin)
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the answer")
	return func(c *cli, args []string) error {
		if *timeout <= 0 {
			return usagef("-timeout is %v, want more than 0", *timeout)
		}
		a := *addr
		if a == "" {
			a = os.Getenv(rpcdaemon.EnvName("admin"))
		}
		if a == "" {
			a = defaultAdmin
		}
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		answer, err := rpcdaemon.Ready(ctx, a)
		if err != nil {
			return err
		}
		fmt.Fprintln(c.stdout, answer)
		return nil
	}
}
