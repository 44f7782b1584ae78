package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	rpcdaemon "github.com/rpcd/rpcd/daemon"
	"github.com/rpcd/rpcd/handler"
)

// Exit statuses. A Go panic exits 2, the runtime's own status, which no
// mistake uses: a supervisor restarts a daemon that crashed (1 or 2) and
// leaves one whose configuration is wrong (78) down until it is fixed.
const (
	exitOK    = 0
	exitFail  = 1  // a call, a connection or the server failed
	exitUsage = 78 // EX_CONFIG of sysexits.h: the command line, the environment or the configuration file is wrong
)

// defaultAddr is where serve listens and where call and routes dial.
const defaultAddr = rpcdaemon.DefaultAddr

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run runs the command line args (without the program name) and returns the
// exit status. serve stops on SIGINT or SIGTERM.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr, signals: notifySignals}
	return c.run(args)
}

// cli is one run of the program with its standard streams. Tests build one
// directly to feed serve its signals from a channel.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	// signals subscribes to the signals that stop serve; stop unsubscribes.
	signals func() (sigs <-chan os.Signal, stop func())

	// register, if set, adds routes after the built-in ones (tests).
	register func(*handler.Registry)

	// environ is the environment for commands with -config
	// (rpcdaemon.Load); os.Environ if nil.
	environ func() []string

	// conf is what the environment, the credentials and the file said, for
	// a command with -config, once its flags are parsed; warned says the
	// command has logged conf's warnings.
	conf   *rpcdaemon.Loaded
	warned bool
}

// notifySignals relays SIGINT and SIGTERM (serve stops) and SIGHUP (it reloads).
func notifySignals() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	return ch, func() { signal.Stop(ch) }
}

// interruptible returns a context that ends on SIGINT or SIGTERM (the
// commands that run for a while stop early and report what they have), and
// the function that releases it.
func (c *cli) interruptible() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	if c.signals == nil {
		return ctx, cancel
	}
	sigs, stopSignals := c.signals()
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-done:
		}
	}()
	return ctx, func() {
		close(done)
		stopSignals()
		cancel()
	}
}

// command is a subcommand.
type command struct {
	name     string
	synopsis string // what follows "rpcd name" in the usage line
	summary  string // one line for the command list
	about    string // a paragraph for -h
	example  string // one or more example lines for -h
	args     bool   // it takes arguments after its flags; without, any is a usage error

	// setup defines the command's flags on fs and returns the function
	// that runs the command once they are parsed, given the arguments
	// left after the flags.
	setup func(fs *flag.FlagSet) func(c *cli, args []string) error
}

// commands lists the subcommands in the order help shows them.
var commands = []*command{serveCmd, callCmd, routesCmd, describeCmd, genCmd, pubCmd, subCmd, benchCmd, soakCmd, chaosCmd, recordCmd, tokenCmd, healthCmd, upgradeCmd, versionCmd}

// lookup returns the command called name, or nil.
func lookup(name string) *command {
	for _, cmd := range commands {
		if cmd.name == name {
			return cmd
		}
	}
	return nil
}

// run dispatches args to a command, or prints help, and returns the exit
// status.
func (c *cli) run(args []string) int {
	if len(args) == 0 {
		printCommands(c.stderr)
		return exitUsage
	}
	switch name := args[0]; name {
	case "-h", "-help", "--help":
		printCommands(c.stdout)
		return exitOK
	case "-version", "--version":
		return c.runCommand(versionCmd, args[1:])
	case "help":
		if len(args) == 1 {
			printCommands(c.stdout)
			return exitOK
		}
		cmd := lookup(args[1])
		if cmd == nil {
			fmt.Fprintf(c.stderr, "rpcd help: unknown command %q\n\n", args[1])
			printCommands(c.stderr)
			return exitUsage
		}
		fs, _ := cmd.flagSet()
		fs.SetOutput(c.stdout)
		fs.Usage()
		return exitOK
	default:
		cmd := lookup(name)
		if cmd == nil {
			fmt.Fprintf(c.stderr, "rpcd: unknown command %q\n\n", name)
			printCommands(c.stderr)
			return exitUsage
		}
		return c.runCommand(cmd, args[1:])
	}
}

// usage is the command's usage line: rpcd, its name and its synopsis.
func (cmd *command) usage() string {
	return strings.TrimSpace("rpcd " + cmd.name + " " + cmd.synopsis)
}

// hasFlags reports whether fs defines any flag.
func hasFlags(fs *flag.FlagSet) bool {
	found := false
	fs.VisitAll(func(*flag.Flag) { found = true })
	return found
}

// flagSet returns the command's flags, with a usage that shows the
// synopsis, what the command does and an example, and the function that
// runs the command.
func (cmd *command) flagSet() (*flag.FlagSet, func(*cli, []string) error) {
	fs := flag.NewFlagSet("rpcd "+cmd.name, flag.ContinueOnError)
	runFn := cmd.setup(fs)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: %s\n\n%s\n\nexample:\n", cmd.usage(), cmd.about)
		for _, line := range strings.Split(cmd.example, "\n") {
			fmt.Fprintf(w, "  %s\n", line)
		}
		if hasFlags(fs) {
			fmt.Fprint(w, "\nflags:\n")
			fs.PrintDefaults()
		}
	}
	return fs, runFn
}

// runCommand parses the command's flags and runs it. -h prints the usage on
// standard output and exits 0; a usage error prints every mistake and the
// usage line on standard error and exits 78.
func (c *cli) runCommand(cmd *command, args []string) int {
	fs, runFn := cmd.flagSet()
	fs.SetOutput(io.Discard) // Parse's own messages; reported below
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(c.stdout)
		fs.Usage()
		return exitOK
	}
	fs.SetOutput(c.stderr)
	var src rpcdaemon.Sources // where flags not on the command line came from
	switch {
	case err != nil:
		err = &usageError{err.Error()}
	case fs.Lookup(rpcdaemon.FileFlag) != nil:
		environ := c.environ
		if environ == nil {
			environ = os.Environ
		}
		c.conf = rpcdaemon.Load(fs, environ())
		src = c.conf.Sources
		if c.conf.Fatal {
			err = c.conf.Err
		}
		// Otherwise the command reports c.conf.Err with the mistakes of
		// its own checks, all at once.
	}
	if err == nil && !cmd.args && fs.NArg() > 0 {
		err = usagef("unexpected argument %q", fs.Arg(0))
	}
	if err == nil {
		err = runFn(c, fs.Args())
	}
	var st exitStatus
	msgs := usageMessages(err)
	switch {
	case err == nil:
		return exitOK
	case msgs != nil:
		if c.conf != nil && !c.warned {
			for _, w := range c.conf.Warnings {
				fmt.Fprintf(c.stderr, "rpcd %s: warning: %s\n", cmd.name, w)
			}
		}
		for _, msg := range msgs {
			fmt.Fprintf(c.stderr, "rpcd %s: %s\n", cmd.name, src.Attribute(msg))
		}
		fmt.Fprintf(c.stderr, "usage: %s\nRun \"rpcd %s -h\" for more.\n", cmd.usage(), cmd.name)
		return exitUsage
	case errors.As(err, &st):
		return int(st)
	default:
		fmt.Fprintln(c.stderr, err)
		return exitFail
	}
}

// usageError is a mistake on the command line, in the environment or in
// the configuration file: exit status 78, as a *rpcdaemon.ConfigError is.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// usagef returns a usageError with the formatted message.
func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// usageMessages returns the messages of the usage errors err is: one, or
// several joined by errors.Join; nil if err is nil or any of them is
// another error. A *rpcdaemon.ConfigError names settings as flags.
func usageMessages(err error) []string {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var msgs []string
		for _, e := range joined.Unwrap() {
			m := usageMessages(e)
			if m == nil {
				return nil
			}
			msgs = append(msgs, m...)
		}
		return msgs
	}
	var ue *usageError
	var ce *rpcdaemon.ConfigError
	switch {
	case errors.As(err, &ue):
		return []string{ue.msg}
	case errors.As(err, &ce):
		return []string{ce.Text(func(key string) string { return "-" + key })}
	}
	return nil
}

// exitStatus ends a command whose failure has already been reported (in
// the log) with that status.
type exitStatus int

func (s exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

// printCommands writes the list of commands to w.
func printCommands(w io.Writer) {
	fmt.Fprint(w, "Rpcd serves rpcd routes and calls them.\n\nusage: rpcd <command> [flags] [arguments]\n\ncommands:\n")
	for _, cmd := range commands {
		fmt.Fprintf(w, "  %-7s %s\n", cmd.name, cmd.summary)
	}
	fmt.Fprintf(w, "  %-7s %s\n", "help", "print this list, or a command's usage: rpcd help call")
	fmt.Fprint(w, "\nRun \"rpcd <command> -h\" for a command's flags.\n")
}
