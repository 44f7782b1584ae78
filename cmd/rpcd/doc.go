// Rpcd is the rpcd daemon and command-line client: it serves the built-in
// routes on gnet event loops, calls routes on a running server, and lists a
// server's routes.
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
//	help    print this list, or a command's usage: rpcd help call
//
// Every command takes -h for its flags.
//
// # serve
//
//	rpcd serve [-addr 127.0.0.1:7070] [-loops 0] [-max-frame 4194304]
//	           [-max-inflight 0] [-drain-timeout 10s]
//	           [-log-level info] [-log-format text]
//
// Serve listens on -addr ("host:port", or "unix:///path") and logs to
// standard error through log/slog, in text or JSON. Once it listens it logs
// "rpcd: serving" with the address it is bound to, so -addr 127.0.0.1:0
// shows the port the kernel chose. On SIGINT or SIGTERM it logs
// "rpcd: draining", sends GoAway on every connection, answers the calls in
// flight for up to -drain-timeout, logs "rpcd: stopped" and exits 0; it
// exits 1 if the calls in flight outlast -drain-timeout, and at once with
// status 1 on a second signal. It exits 1 if it cannot listen.
//
// # call
//
//	rpcd call [-addr 127.0.0.1:7070] [-timeout 5s] [-raw] [-meta key=value]... ROUTE [ARG]
//
// Call calls ROUTE once and writes the reply to standard output. ARG is a
// JSON value, checked before it is sent; "-" reads it from standard input;
// without ARG the call carries no argument. The JSON reply is printed as the
// server sent it, followed by a newline:
//
//	$ rpcd call Math/Sum '{"a":1,"b":2}'
//	3
//
// With -raw, ARG is sent as raw bytes (codec raw) and the reply is written
// exactly as it came, with no newline added. -meta adds a metadata entry to
// the call and may be repeated. A failed call prints the error, as in
// "rpcd: not found: no route No/Such", and exits 1.
//
// # routes
//
//	rpcd routes [-addr 127.0.0.1:7070] [-timeout 5s]
//
// Routes calls Sys/Routes and prints one route per line, in the order the
// server returns them, with " (blocking)" after routes that run on the
// blocking pool.
//
// # Exit status
//
// 0 on success, 1 when a call, a connection or the server fails, 2 on a
// usage error (an unknown command or flag, a missing route, an ARG that is
// not JSON).
package main
