// Rpcd is the rpcd daemon and command-line client: it serves the built-in
// routes on gnet event loops, calls routes on a running server, lists a
// server's routes, load-tests a server, soaks it, and kills and restarts
// it under load to check that no call runs twice.
//
// Usage:
//
//	rpcd <command> [flags] [arguments]
//
// The commands are:
//
//	serve   serve the built-in routes (Sys/*, Math/Sum, Bench/*)
//	call    call a route and print its reply
//	routes  list the routes a server has
//	describe print what a server's routes take and answer
//	pub     publish a message to a topic
//	sub     subscribe to a topic pattern and print the messages
//	bench   load a server and report calls/s and latency
//	soak    hold many connections at a fixed rate for minutes; check the server stays flat
//	chaos   kill and restart a server while clients call it; check no call ran twice
//	token   sign a token for servers started with -auth-hmac-key
//	health  check that a server is ready, through its admin listener (/readyz)
//	version print which rpcd this is: version, revision, Go release
//	help    print this list, or a command's usage: rpcd help call
//
// "rpcd help COMMAND" (or "rpcd COMMAND -h") says what a command does, with
// an example, and lists its flags.
//
// Serve is package daemon run with the flags, the environment and the
// configuration file mapped to its Config: every setting is a flag, an
// RPCD_ variable and a key of the file, as docs/configuration.md lists
// them; docs/operating.md says how to run it.
//
// # Exit status
//
// 0 on success; 1 when a call, a connection or the server fails; 78
// (EX_CONFIG of sysexits.h) on a mistake of the command line, the
// environment or the configuration (an unknown command or flag, a missing
// route, an ARG that is not JSON, a bad key or value in serve's file, a
// file serve cannot read). A Go panic exits 2, which rpcd itself never
// uses, so that a supervisor can restart a crash and leave a mistake
// alone.
package main
