// Package proto is rpcd's wire format: frame headers, kinds, flags, codecs,
// error codes and metadata, with functions that parse frames from bytes and
// append frames to a caller's buffer.
//
// The format is specified in docs/protocol.md; every constant here mirrors a
// row of that page. The package does no I/O and starts no goroutines. Parsing
// allocates nothing: a parsed Frame's sections are views into the caller's
// bytes, valid only as long as those bytes are.
package proto
