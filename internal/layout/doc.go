// Package layout holds a test, and nothing else: it keeps
// docs/architecture.md and the rules of the house true. It lists the
// module's packages with `go list -json ./...` (and skips when the go
// command is not on PATH) and checks that
//
//   - docs/architecture.md names every package of the module;
//   - only reactor imports gnet, in its code or its tests;
//   - proto imports no package of the module, and no package that does
//     I/O (net, os, syscall);
//   - handler, handler/builtin, handler/schema and handler/transport
//     import none of reactor, client, gateway, ws and net, but for the
//     type net.Addr;
//   - only handler, handler/schema and handler/transport import
//     internal/handlerstate, in their code or their tests;
//   - gen imports none of reactor, client, gateway, ws and daemon;
//   - record imports none of reactor, client, gateway, ws, admin and
//     daemon (its tests may);
//   - the server middleware packages (metrics, otelrpcd, ratelimit, auth)
//     do not import client, and client does not import reactor;
//   - reactor and gateway do not import auth;
//   - no package imports daemon but cmd/rpcd.
//
// Imports are read from the source files themselves, those of every build
// constraint included, so that a rule broken in a file for another system
// fails here too. A rule that has to change changes in
// docs/architecture.md and in layout_test.go together.
//
//	go test ./internal/layout
package layout
