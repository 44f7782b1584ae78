// Package interop checks that docs/protocol.md is enough to implement rpcd
// from the page alone. Its test starts an rpcd server in-process and runs a
// Python client, interop/python/rpcd_client.py, against it; that client was
// written from docs/protocol.md only, without reading rpcd's Go sources, so a
// passing run shows the document (not the Go code) describes the wire format.
// The test is skipped when python3 is not on PATH.
package interop
