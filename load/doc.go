// Package load load-tests an rpcd server. Bench calls it from many
// callers at once and reports calls/s, errors by kind and latency
// percentiles; Replay makes the calls of a recording again, at their
// recorded times, and compares the answers with the recorded ones; Soak
// holds many connections at a steady rate for minutes and checks that the
// server's memory and goroutines stay flat; Stream moves bytes through
// streams and FanOut messages through publish/subscribe; and Chaos calls a
// server while something kills and restarts it, then checks that no call
// ran twice. `rpcd bench` (-replay too), `rpcd soak` and `rpcd chaos` are
// this package and their flags.
//
// # Scenarios
//
// A Scenario is a named load: the route called, what each call sends, and
// how its reply is checked. The named ones (Scenarios) are the six of the
// NewLife.Remoting benchmark report, the seed rpcd set out to pass (NoArg,
// EchoString16, EchoString2000, MultiArgs, EchoPacket16, EchoPacket2000),
// and Sum, which sends new arguments on every call; they call the routes
// of handler/builtin, which `rpcd serve` serves and a program adds with
// builtin.Register. A caller of its own goroutine calls a JSON scenario
// through Client.Call, encoding and decoding each call as a typed caller
// does, and a raw one through CallRaw with a reply buffer; a caller on a
// client.Pipe encodes and decodes the same values with the same codec.
// RawRoute and JSONRoute make a scenario of any route. SeedMatrix is the
// seed table: its six scenarios at 1 to 32 callers and two at 100
// connections.
//
// Every reply is checked: one that is not the one expected counts as a
// "wrong reply" (ErrWrongReply), other failures by their rpcd code
// ("unavailable", "deadline exceeded", ...). Failed calls are counted in
// the reports, never returned as errors.
//
// # Loads
//
// A load is closed loop (each caller calls as soon as its previous reply
// came) or open loop (Config.Rate: calls at scheduled times, each call's
// latency counted from its schedule, so that a stalled server shows, as
// wrk2 does it). Runs are measured after a warm-up whose calls are not
// counted. A closed loop's callers wait for a connection that was lost
// (the clients' WaitForReady), so that a lost connection costs the calls
// it had in flight and, while none comes back, a caller's call a
// deadline, not one failure per attempt.
//
// An open loop is paced on one scheduler, a timing wheel of 1 ms ticks
// (internal/loadgen's Wheel), with no timer per caller: a tick's
// calls start together at its end, each at most a tick after its time once
// its pacer wakes, which Go's runtime may delay by up to about another
// millisecond in an otherwise idle process. That wait, about a
// millisecond on average, counts in an open loop's latency. A caller of a
// Bench has one call in flight at most: a call due before its previous
// reply starts when that reply comes, late. A Soak's connection has up to
// SoakConfig.Pipeline (2): a call goes at its time behind those still
// unanswered, and the calls a pacer finds due together go in one write.
//
// # Replays
//
// Replay takes a Recording's calls (ReplayCall: each with its time,
// connection, route, kind, codec, metadata, deadline and payload, and the
// recorded answer) and makes them again open loop: a client.Client per
// recorded connection, each connection's calls in their order, each when it
// is due (its recorded time divided by ReplayConfig.Speed), paced on the
// same Wheel as every open loop, through the client's asynchronous calls
// so that few goroutines keep many calls in flight. Requests, OneWay calls
// and Publishes are replayed; the frames of streams, subscriptions and
// cancels are counted as skipped. Its Report is a bench run's, latency
// counted from when each call was due, with a Replay part: the rate asked
// (the recorded one × Speed) and the rate reached, a line when it fell
// behind, the calls by route, and with ReplayConfig.Compare the answers
// that differ from the recorded ones, by route.
//
// # Clients
//
// Every call goes through a client.Client per connection, as a program's
// would: what the load measures is what an application gets. A scenario
// with frames (the named ones, RawRoute's, JSONRoute's) on one server runs
// on the clients' asynchronous calls, a client.Pipe per connection and a
// tag per caller, with no goroutine per caller: each done function, on the
// goroutine that read the reply, records its call, timed by when the
// client read its batch of replies, and starts its caller's next, which
// goes out with the others that batch starts, in one write; an open loop's
// calls start from a few pacers, a wheel each. With more than one
// connection the clients' connections are read by the client's event
// loops (client.Options.EventLoops), not a goroutine each; a connection
// then costs about 9 KiB resident. A service target, or a scenario of
// NewCall alone, runs a goroutine per caller.
//
// # Servers
//
// The package dials an address and never starts a server: `rpcd bench`
// without -addr starts `rpcd serve` as a child process, a Go program serves
// a registry with reactor, here or elsewhere. Config.Addr may also name a
// service (etcd://, dns://, static://), whose nodes each client spreads its
// calls over. Soak and Stream sample the server through builtin.Stats;
// Chaos needs ChaosRecord (HandleChaosRecord) and a function that makes the
// faults.
//
// # Reports
//
// The report types marshal to JSON with the field names of the commands'
// -json output, which scripts read; their WriteText methods write the text
// the commands print.
package load
