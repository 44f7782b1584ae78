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
// Every command takes -h for its flags.
//
// # serve
//
//	rpcd serve [-addr 127.0.0.1:7070] [-loops 0] [-max-frame 4194304]
//	           [-max-inflight 0] [-drain-timeout 10s]
//	           [-log-level info] [-log-format text] [limits] [security]
//	           [-gateway ADDR] [-admin ADDR] [-config FILE]
//
// Serve listens on -addr ("host:port", or "unix:///path") and logs to
// standard error through log/slog, in text or JSON. Once it listens it logs
// "rpcd: serving" with the address it is bound to, so -addr 127.0.0.1:0
// shows the port the kernel chose. On SIGINT or SIGTERM it logs
// "rpcd: draining", sends GoAway on every connection, answers the calls in
// flight for up to -drain-timeout, logs "rpcd: stopped" and exits 0; it
// exits 1 if the calls in flight outlast -drain-timeout, and at once with
// status 1 on a second signal (half a second or more after the first). It
// exits 1 if it cannot listen (an address another process holds). Under
// systemd (Type=notify, $NOTIFY_SOCKET set) it sends READY=1 once it
// serves and STOPPING=1 when it begins to drain.
//
// The limits each have a default that needs no flag (docs/reliability.md
// lists them): -max-conns 10000 connections, -max-outbound 8 MiB of unsent
// output per connection before it stops being read, -frame-timeout 30s for
// a frame to arrive whole, -write-timeout 30s for a peer to read some of
// its output, -keepalive 30s of silence
// before a Ping and -keepalive-timeout 10s for any answer, -idle-timeout
// off, -handshake-timeout 5s.
//
// Security: -tls-cert and -tls-key serve TLS; -tls-client-ca adds mutual
// TLS (-tls-client-auth require or verify-if-given), a verified
// certificate's CN being the caller's subject and its OUs its roles.
// -auth-tokens FILE ("TOKEN SUBJECT [ROLE,...]" per line) and
// -auth-hmac-key FILE (tokens signed by "rpcd token") require every
// connection to authenticate with a Hello before it is served.
// -auth-require Math/Sum=admin,Admin/Drop=admin|ops lets only callers with
// one of the roles call a route:
//
//	rpcd serve -tls-cert server.pem -tls-key server.key \
//	           -auth-tokens tokens -auth-require Math/Sum=admin
//
// -auth-topics says who may publish and subscribe where, as rules
// separated by ';' or new lines: pub:PATTERN=ROLE[|ROLE...] and
// sub:PATTERN=ROLE[|ROLE...] allow, deny-pub: and deny-sub: deny (a deny
// wins), role * is every connection, and with any rule what no rule allows
// is refused. A subscription is refused when its pattern reaches a single
// topic its subscriber may not have (docs/two-way.md):
//
//	rpcd serve -auth-tokens tokens \
//	           -auth-topics 'pub:orders.>=writer;sub:orders.>=reader|ops;deny-sub:orders.internal.>=reader'
//
// -gateway ADDR also serves the routes over HTTP/JSON on a port of its own:
// POST /rpc/Controller/Action with a JSON body (or, for raw routes, an
// application/octet-stream one) answers with the handler's reply, an error
// with the HTTP status for its code and {"code":...,"message":...}. The
// gateway requires the same tokens, roles and client certificates as the
// main port, logs "rpcd: gateway serving" with its address, and drains with
// it; it answers JSON-RPC 2.0 at /jsonrpc, rpcd over WebSocket at /ws, and
// an OpenAPI 3.1 document of its routes at /openapi.json (docs/gateway.md):
//
//	$ curl --json '{"a":1,"b":2}' http://127.0.0.1:8080/rpc/Math/Sum
//	3
//
// -admin ADDR serves, over HTTP on a port of its own, Prometheus metrics at
// /metrics (calls by route and code, handler time by route, calls in
// flight, error replies by code on both ports, the gateway's responses by
// route and status, connections, bytes, slow consumers, the build), pprof
// at /debug/pprof/, /healthz, /readyz (503 from the moment the server
// begins to drain) and a live page at / that refreshes itself every second
// and charts the last ten minutes, which the server keeps. It
// logs "rpcd: admin serving" with its address before "rpcd: serving", and
// closes after the drain. It has no authentication: give it a loopback or
// private address (docs/operating.md):
//
//	$ rpcd serve -admin 127.0.0.1:7071 &
//	$ curl -s 127.0.0.1:7071/readyz
//	ready
//
// With the standard OpenTelemetry variables naming a collector, serve
// exports a server span per call over OTLP, the child of the traceparent
// the call carries, and logs "rpcd: exporting spans"; without them it makes
// none. OTEL_EXPORTER_OTLP_PROTOCOL is grpc, http/protobuf (the default) or
// http/json; OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER and the others mean what
// OpenTelemetry says; OTEL_SDK_DISABLED=true turns it off
// (docs/configuration.md, docs/operating.md):
//
//	$ OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 rpcd serve
//
// Every flag is also read from the environment, as RPCD_ and the flag's
// name in upper case with '-' as '_' (RPCD_MAX_CONNS for -max-conns), and
// from the YAML file -config FILE (or $RPCD_CONFIG) names, whose keys are
// the flags' names (max-conns: 20000). A flag that names a file to read
// (-auth-tokens, -tls-key, ...) also takes the file of its name in
// $CREDENTIALS_DIRECTORY, where systemd's LoadCredential= puts it. A flag
// on the command line wins over the environment, which wins over a
// credential, which wins over the file. A key that is no flag or is given
// twice, a value of the wrong type, one serve refuses, an address without
// a port, or a file a flag names that cannot be read stops it before it
// listens with exit status 78, every mistake reported at once with the
// file, line and key, or the variable, that gave it. An RPCD_ variable
// that names no flag is warned about (docs/configuration.md).
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
// "rpcd: not found: no route No/Such", and exits 1. A bad argument is named
// by the server: "rpcd: invalid argument: Math/Sum: argument: field "a":
// want a number, got a string at byte 6". An address that is not an rpcd
// server is named within a second (call, routes, pub, sub and bench begin
// each connection with a Ping): "rpcd: unavailable: 127.0.0.1:8080 answered
// with bytes that are not rpcd frames (HTTP?)".
//
// call, routes and bench reach a secured server with -tls (trusting the
// system's CAs), -tls-ca FILE, -tls-cert and -tls-key (a client
// certificate), -tls-server-name, and a token: -token-file FILE, the
// RPCD_TOKEN environment variable, or -token TOKEN (which ps shows to
// other users); -auth-method token or hmac names its kind:
//
//	$ RPCD_TOKEN=t-admin rpcd call -tls-ca ca.pem Math/Sum '{"a":1,"b":2}'
//	3
//
// # routes
//
//	rpcd routes [-addr 127.0.0.1:7070] [-timeout 5s]
//
// Routes calls Sys/Routes and prints one route per line, in the order the
// server returns them, with " (blocking)" after routes that run on the
// blocking pool.
//
// # describe
//
//	rpcd describe [-addr 127.0.0.1:7070] [-timeout 5s] [-json] [ROUTE]
//
// Describe calls Sys/Describe and prints what ROUTE, or every route, takes
// and answers, as grpcurl's describe does: the route and its kind (typed,
// raw or stream), then a typed route's argument and reply in a Go-like
// form, derived from the server's Go types:
//
//	$ rpcd describe Math/Sum
//	Math/Sum: typed
//	  argument builtin.SumArgs {
//	    a int64
//	    b int64
//	  }
//	  reply    int64
//
// -json prints the descriptions as the server sent them, with their JSON
// Schemas (docs/protocol.md, "Route descriptions").
//
// # pub and sub
//
//	rpcd pub [-addr 127.0.0.1:7070] [-raw] TOPIC MESSAGE
//	rpcd sub [-addr 127.0.0.1:7070] [-n N] PATTERN
//
// Pub publishes MESSAGE (JSON, or bytes with -raw) to TOPIC, tokens
// separated by dots ("orders.eu.created"). Sub subscribes to PATTERN, where
// "*" stands for one token and a final ">" for one or more
// ("orders.*.created", "orders.>"), and prints each message as the topic,
// a space and the payload, until Ctrl-C or -n messages. docs/two-way.md
// has the semantics: at most once, in order per publisher, a bounded queue
// per subscriber. Both take the call command's TLS and token flags; a
// publish or subscription the server's -auth-topics refuses prints the
// refusal ("rpcd: permission denied: ...") and exits 1.
//
// # bench
//
//	rpcd bench [-addr ADDR] [-scenario NoArg] [-c 1] [-inflight 1]
//	           [-d 5s | -n N] [-warmup 1s] [-rate 0] [-timeout 5s] [-json]
//	rpcd bench -route ROUTE [-payload FILE | -size N] [-json-codec] [-expect-echo] ...
//	rpcd bench -matrix seed [-d 2s] [-warmup 500ms] [-addr ADDR] [-json]
//
// Bench is the load generator users load-test servers with. Without -addr
// it starts this program as "rpcd serve -addr 127.0.0.1:0" in a child
// process, reads the address from its "rpcd: serving" line, loads it, and
// stops it at the end (SIGTERM, then SIGKILL after 5s), also on an error or
// Ctrl-C. The first line of output names the server: "server: child process
// pid N at ADDR", or "server: ADDR".
//
// The scenarios are those of the NewLife.Remoting report, each reply
// checked: NoArg (Bench/NoArg, reply 42), EchoString16 and EchoString2000
// (Bench/EchoString, a JSON string echoed), MultiArgs (Bench/MultiArgs),
// EchoPacket16 and EchoPacket2000 (Bench/EchoPacket, raw bytes echoed), and
// Sum (Math/Sum, a and b new on every call). -route loads any route with
// the bytes of -payload FILE or -size N bytes, raw or, with -json-codec,
// JSON; its replies are checked only with -expect-echo. A reply that is
// not the one expected counts as a "wrong reply" error; other errors count
// by their rpcd code ("unavailable", "deadline exceeded", ...).
//
// -c is the number of TCP connections, each with -inflight callers calling
// without pause (closed loop) for -d after -warmup, or until -n calls in
// all; -rate R makes it open loop, R calls/s in total, each latency counted
// from the call's scheduled start. -timeout is each call's deadline.
// -driver wire (the default where it can) writes and reads the frames in
// this program, a batch of calls per read and write on each connection's
// goroutine; -driver client calls through a client per connection with a
// goroutine per caller. The CPU per call of both sides is reported, the
// server's from its Sys/Stats.
//
//	$ rpcd bench -scenario EchoPacket16 -c 4 -inflight 32 -d 5s
//	server: child process pid 4242 at 127.0.0.1:40123
//	EchoPacket16: Bench/EchoPacket, raw, 16-byte payload; 5s after 1s warm-up, ...
//	scenario      conns×inflight  calls   calls/s  errors  mean µs  p50 µs  ...
//	EchoPacket16  4×32            ...
//
// The table gives calls, calls/s, errors, mean, p50, p90, p99, p99.9 and
// max latency in µs, MB/s of request and reply payloads, and this process's
// CPU time per call; errors are listed by kind below it, each with its
// first message. -json writes one JSON object instead, with calls,
// calls_per_sec, errors, errors_by, mean_us, p50_us, p90_us, p99_us,
// p999_us, max_us, bytes_per_sec, cpu_per_call_us and the settings of the
// run. On a terminal, standard error shows a progress line each second.
//
// -matrix seed runs the seed table against one server (the scenarios rpcd's
// benchmarks began from; docs/performance.md says where): its six
// scenarios at 1, 4, 16, 20 and 32 callers, each on its own
// connection, then NoArg and EchoPacket16 over 100 connections; each cell
// runs -d (default 2s) after -warmup (default 500ms). It prints one table,
// calls/s and p99 µs per cell, or with -json an array of cell objects.
//
// Bench exits 0 when the run completes, even if calls failed; 1 if it
// cannot run, if every call failed, or on Ctrl-C (after printing what was
// measured); 2 on a usage error.
//
// # soak
//
//	rpcd soak [-addr ADDR] [-c 1000] [-rate 100] [-d 5m] [-warmup 30s]
//	          [-every 10s] [-scenario EchoPacket16] [-timeout 5s] [-json]
//
// Soak opens -c connections and calls -scenario on each -rate times a
// second (open loop) for -d after -warmup; its wire driver (-driver)
// paces them from a few goroutines, a few KiB a connection. Every -every
// it prints the window's calls/s, errors and p99, and samples the server
// through Sys/Stats: heap in use, resident memory, goroutines and
// connections. Before the load it reports the server's memory per
// connection. It passes (exit 0) when no call failed, every window after
// the warm-up made 98% of the rate asked for, and the server's heap,
// resident memory and goroutines stayed flat; otherwise it says which and
// exits 1. Without -addr it runs its own "rpcd serve" child with -max-conns
// raised to fit -c. docs/reliability.md has the figures of this machine.
//
// # chaos
//
//	rpcd chaos [-d 30s] [-callers 16] [-conns 4] [-kill-every 1s]
//	           [-down 100ms] [-term 0.25] [-timeout 2s] [-ledger FILE] [-json]
//
// Chaos runs "rpcd serve -chaos-ledger FILE" on a port of its own and has
// -callers goroutines call Chaos/Record, each call with a key of its own,
// while it kills the server at random (SIGKILL, or SIGTERM with probability
// -term) and restarts it. The server appends each key it runs to the
// ledger. At the end every call is checked against it: a reply means the
// call ran once, an unprocessed error that it never ran, an unknown fate
// that it ran at most once; every error must be a typed rpcd error. It
// prints the counts and exits 1 if any call ran twice or any other check
// failed.
//
// # token
//
//	rpcd token -key FILE -subject NAME [-roles a,b] [-ttl 24h]
//
// Token prints a token signed with the HMAC key in FILE, as given to
// "rpcd serve -auth-hmac-key", naming a subject, its roles and an expiry.
// The server needs no list of such tokens; each expires by itself.
//
// # health
//
//	rpcd health [-admin ADDR] [-timeout 2s]
//
// Health asks the admin listener of "rpcd serve -admin ADDR" for /readyz
// and exits 0, printing "ready", while the server serves; 1 before it
// serves, from the moment it drains, or when nothing answers, saying why.
// Without -admin it asks $RPCD_ADMIN (0.0.0.0 or :: as loopback), else
// 127.0.0.1:7071. It is the container image's HEALTHCHECK, which has no
// shell or curl.
//
// # version
//
//	rpcd version
//
// Version prints which rpcd this is, as the labels of the admin listener's
// rpcd_build_info metric: the module's version ((devel) for a build from a
// checkout), the revision of the source (unknown if the build did not
// record one) and the Go release that built it. rpcd -version and
// rpcd --version are the same:
//
//	$ rpcd version
//	rpcd version=v1.2.0 revision=unknown go_version=go1.26.0
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
