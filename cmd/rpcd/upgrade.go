package main

import (
	"flag"
	"time"

	rpcdaemon "github.com/rpcd/rpcd/daemon"
)

var upgradeCmd = &command{
	name:     "upgrade",
	synopsis: "[-admin ADDR] [-timeout 2m]",
	summary:  "upgrade a running server to the binary at its path, through its admin listener",
	about: `Upgrade asks the admin listener of "rpcd serve -admin ADDR", from this
machine, to upgrade its server (POST /upgrade), as SIGUSR2 does: the server
starts the program at its path again with the same arguments, hands it its
listeners, and drains once the new process serves. Upgrade waits for the
outcome and exits 0, printing the new pid, or 1 with why: another upgrade
runs, or the new process exited or did not serve within -upgrade-timeout
(the old one serves on). Without -admin it asks $RPCD_ADMIN, else
127.0.0.1:7071, as rpcd health does.`,
	example: `rpcd upgrade -admin 127.0.0.1:7071`,
	setup:   setupUpgrade,
}

func setupUpgrade(fs *flag.FlagSet) func(*cli, []string) error {
	return adminAsk(fs, 2*time.Minute, "how long to wait for the outcome", rpcdaemon.RequestUpgrade)
}
