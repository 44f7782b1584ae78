// Package daemon is rpcd serve as a library: what the rpcd binary runs,
// for a Go program to run with routes of its own.
//
// A Config holds the daemon's settings, one field each: the keys of rpcd
// serve's configuration file, its flags and its RPCD_ environment
// variables (docs/configuration.md). Settings is their table, each with
// its key, variable, default and help; rpcd serve's flags, its -h and
// configuration.md's reference come from it. DefaultConfig gives every
// default, those the reactor has taken from reactor.DefaultOptions.
// Validate names every mistake at once; Load fills a flag.FlagSet of the
// settings (DefineFlags) from the environment, systemd's credentials and
// a YAML file, with rpcd serve's precedence and messages.
//
// New builds a Daemon from a Config: the built-in routes (Sys/*, Math/Sum,
// Bench/*) and the middleware the Config asks for, in a registry to which
// the program adds its own (Registry). Run serves until its context ends:
// the RPC port on gnet's event loops, the HTTP gateway (HTTP/JSON at /rpc/,
// JSON-RPC 2.0 at /jsonrpc, the OpenAPI document at /openapi.json, rpcd
// over WebSocket at /ws), the admin listener (Prometheus metrics, pprof,
// /healthz, /readyz and the live page), the node in etcd; then it drains
// in the documented order ("Stopping" in docs/architecture.md):
//
//	cfg := daemon.DefaultConfig()
//	cfg.Gateway = "127.0.0.1:8080"
//	d, err := daemon.New(cfg)
//	if err != nil {
//		log.Fatal(err)
//	}
//	d.Registry().Handle("Greet/Hello", handler.Func(hello))
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
//	defer stop()
//	if err := d.Run(ctx); err != nil {
//		log.Fatal(err)
//	}
//
// RunSignals runs it as rpcd serve does on SIGINT and SIGTERM: the first
// signal drains, a second one later stops at once. Listeners may be given
// instead of addresses (WithListeners).
//
// Reload applies a new Config while the daemon serves: the settings that
// can change so (LiveSettings: tokens and keys, roles, topic rules, rate
// limits, the TLS certificate, the log level) are swapped in whole, for new
// connections where they authenticate them; the others that changed are
// named as needing an upgrade and kept; a Config with a mistake changes
// nothing. RunSignals reloads on SIGHUP, the configuration read again as
// Load read it (WithReloadFrom, Loaded.Again).
//
// With WithUpgrades, as rpcd serve has it, the daemon upgrades its binary
// without a lost call (Upgrade; SIGUSR2 through RunSignals; POST /upgrade
// on the admin listener): it starts the program again, hands it its
// listeners, and drains once the new process serves; a daemon an upgrade
// started takes its listeners from the old one.
//
// The admin listener may require authentication (AdminTokenFile: a
// bearer token; AdminTLSCert, AdminTLSKey and AdminClientCA: HTTPS and
// mutual TLS): every path but /healthz and /readyz then answers 401
// without it (admin.Require).
//
// The daemon records the RPC port's traffic into a file of package record
// while it serves, one recording at a time: from the start with
// Config.Record; from the admin listener (POST /record/start, /record/stop,
// GET /record, /record/file, files named by the daemon in RecordDir,
// refused on a listener off loopback without authentication); and from a
// program (StartRecording, StopRecording, Recording). The recorder is the
// reactor's tap (reactor.Server.SetTap) while the recording runs.
//
// Three helpers serve what runs beside a daemon: Ready asks an admin
// listener whether its daemon is ready (a container's health check, rpcd
// health), RequestUpgrade asks it to upgrade (rpcd upgrade), and a Process
// is a daemon in a child process, started and stopped by signals (the
// server of rpcd bench, soak and chaos).
package daemon
