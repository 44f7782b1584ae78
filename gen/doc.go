// Package gen writes typed clients from the descriptions of a server's
// routes (schema.Description, what Sys/Describe answers and `rpcd describe
// -json` prints): TypeScript types and a facade over clients/ts
// (TypeScript), Python dataclasses and an async facade over clients/python
// (Python), and handler.Method declarations for a Go program that does not
// share the server's Go packages (Go). It is what `rpcd gen` runs.
//
// A typed route gets its argument and reply types, a raw route bytes in and
// out, a stream route a stream handle. Objects are named by their Go type
// on the server ("builtin.SumArgs" becomes SumArgs), or, without one, by
// the route and where they sit in it (MathSumArgument, ...); routes by their
// two halves ("Math/Sum" is Math.Sum in TypeScript and Python, MathSum in
// Go). The same descriptions always give the same bytes, so that a change to
// a route's types shows as a diff of the generated files. Generating does no
// I/O; Fetch asks a server for its descriptions and Read reads saved ones.
//
//	raw, err := gen.Fetch(ctx, c, "") // c: a *client.Client; "": every route
//	ts, err := gen.Generate("ts", raw, gen.Options{})
package gen
