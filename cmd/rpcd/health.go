package main

import (
	"cmp"
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
	return adminAsk(fs, 2*time.Second, "how long to wait for the answer", rpcdaemon.Ready)
}

// adminAsk defines the flags of a command that asks the admin listener of
// a running server something (health, upgrade): -admin, else $RPCD_ADMIN,
// else defaultAdmin, and -timeout; it prints the answer.
func adminAsk(fs *flag.FlagSet, timeout time.Duration, wait string, ask func(context.Context, string) (string, error)) func(*cli, []string) error {
	addr := fs.String("admin", "", "the admin listener's `address`; default $RPCD_ADMIN, else "+defaultAdmin)
	fs.DurationVar(&timeout, "timeout", timeout, wait)
	return func(c *cli, args []string) error {
		if timeout <= 0 {
			return usagef("-timeout is %v, want more than 0", timeout)
		}
		a := cmp.Or(*addr, os.Getenv(rpcdaemon.EnvName("admin")), defaultAdmin)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		answer, err := ask(ctx, a)
		if err != nil {
			return err
		}
		fmt.Fprintln(c.stdout, answer)
		return nil
	}
}
