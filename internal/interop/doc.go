// Package interop checks that docs/protocol.md is enough to implement rpcd
// from the page alone. Its tests start an rpcd server in-process and run
// clients written from docs/protocol.md only, without reading rpcd's Go
// sources, against it, so a passing run shows the document (not the Go
// code) describes the wire format:
//
//   - internal/interop/python/rpcd_client.py, a Python client, with its tests
//     (calls, the server's calls back, publish/subscribe, streams,
//     compression, topic permissions);
//   - internal/interop/node/edges.mjs, a JavaScript client that checks the edges
//     (pipelining, a peer held back, half-close, the lingering close,
//     frames out of order, limits) line by line against the page.
//
// Each test is skipped when its interpreter (python3, node) is not on PATH.
package interop
