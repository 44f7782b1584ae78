package main

import (
	"errors"
	"flag"
	"strings"

	rpcdaemon "github.com/rpcd/rpcd/daemon"
	"github.com/rpcd/rpcd/load"
)

var serveCmd = &command{
	name:     "serve",
	synopsis: "[flags]",
	summary:  "serve the built-in routes",
	about: `Serve listens on -addr and serves the built-in routes (Sys/*, Math/Sum,
Bench/*) on gnet event loops (epoll on Linux, kqueue on macOS and FreeBSD;
on Windows, and over TLS, a goroutine per connection), logging to standard
error. Once listening it logs "rpcd: serving" with the address it is bound
to and the transport. On SIGINT or SIGTERM it drains: it sends GoAway on
every connection, answers the calls in flight for up to -drain-timeout,
logs "rpcd: stopped" and exits 0, or 1 if the calls outlast
-drain-timeout. A second signal, half a second or more after the first,
exits at once with status 1. SIGHUP reloads (docs/operating.md); SIGUSR2
(or rpcd upgrade) starts the program at its path again, hands it the
listeners, and once that serves, drains and exits 0 (docs/operating.md,
"Upgrades"). Mistakes in the flags, the environment or the file are all
reported before it listens, with exit status 78. Each flag is also
$RPCD_NAME and the file's key NAME (docs/configuration.md).`,
	example: `rpcd serve -addr 127.0.0.1:7070 -log-format json`,
	setup:   setupServe,
	args:    true, // checked with the settings, so that every mistake is reported at once
}

// setupServe defines serve's flags, the daemon's settings and two of its
// own; see command.setup.
func setupServe(fs *flag.FlagSet) func(*cli, []string) error {
	cfg := rpcdaemon.DefaultConfig()
	rpcdaemon.DefineFlags(fs, &cfg, "")
	fs.String(rpcdaemon.FileFlag, "", "read flags not given on the command line from this YAML `file` (default $RPCD_CONFIG); each flag is also $RPCD_NAME (docs/configuration.md)")
	ledger := fs.String("chaos-ledger", "", "serve "+load.ChaosRecord+", which appends its argument to this `file` each time it runs (for rpcd chaos)")
	return func(c *cli, args []string) error { return c.serve(cfg, *ledger, args) }
}

func (c *cli) serve(cfg rpcdaemon.Config, ledger string, args []string) error {
	var errs []error // every mistake at once, the configuration's first
	if c.conf != nil {
		errs = append(errs, c.conf.Err)
	}
	if len(args) > 0 {
		errs = append(errs, usagef("unexpected argument %q", args[0]))
	}
	opts := []rpcdaemon.Option{rpcdaemon.WithLogOutput(c.stderr), rpcdaemon.WithReloadFrom(c.conf), rpcdaemon.WithUpgrades()}
	if errors.Join(errs...) == nil { // spans for a daemon that will run
		opts = append(opts, rpcdaemon.WithTracingFromEnv())
	}
	d, err := rpcdaemon.New(cfg, opts...)
	if err := errors.Join(append(errs, err)...); err != nil {
		if d != nil {
			d.Close()
		}
		return err
	}
	if c.conf != nil {
		for _, w := range c.conf.Warnings {
			d.Logger().Warn("rpcd: " + w)
		}
		c.warned = true
	}
	if ledger != "" {
		closeLedger, err := load.HandleChaosRecord(d.Registry(), ledger)
		if err != nil {
			d.Close()
			return usagef("-chaos-ledger: %s", strings.TrimPrefix(err.Error(), "rpcd: "))
		}
		defer closeLedger()
	}
	if c.register != nil {
		c.register(d.Registry())
	}

	// Subscribe before listening: a signal that comes once the address is
	// logged must drain, not kill the process.
	sigs, stopSignals := c.signals()
	defer stopSignals()
	if err := d.RunSignals(sigs); err != nil {
		return exitStatus(exitFail) // Run logged why
	}
	return nil
}
