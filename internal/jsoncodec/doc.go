// Package jsoncodec is the machinery of rpcd's JSON codec, handler.JSON:
// sonic for encoding and decoding, the codec's own paths for the scalars
// most calls carry (scalar.go), and the messages of a payload that does
// not decode, in rpcd's words (message.go).
//
// Package handler is its only user: handler.JSON's Append and Unmarshal
// are Append and Unmarshal here, and Func prepares its types with Prepare.
package jsoncodec
