package proto

import (
	"strconv"
	"strings"
)

// Wire constants of protocol version 1.
const (
	Magic0     byte = 0x52 // 'R', first magic byte
	Magic1     byte = 0x44 // 'D', second magic byte
	Version    byte = 0x01 // the version this package speaks
	HeaderSize      = 24   // bytes in a frame header
)

// Default limits, used where a Limits field is zero.
const (
	DefaultMaxFrameSize = 4 << 20 // whole frame, header included
	DefaultMaxRoute     = 256     // route bytes
	DefaultMaxMetadata  = 8 << 10 // metadata bytes
	MaxPingPayload      = 64      // payload bytes of a Ping or Pong
	MaxHelloPayload     = 4096    // payload bytes of a Hello or Welcome
	MetaAuthMethod      = "rpcd-auth-method"
	MetaCompression     = "rpcd-compression" // on a Hello or Welcome: the compressions its sender takes on calls; on a StreamOpen or an acceptor's first StreamCredit: on the stream's StreamData; on a Subscribe: on the subscription's Messages
)

// Kind says what a frame is.
type Kind uint8

// Frame kinds. Values not listed are reserved.
const (
	KindRequest  Kind = 0x01 // a call that expects a Response or an Error
	KindResponse Kind = 0x02 // the result of a Request
	KindError    Kind = 0x03 // the failure of a Request
	KindOneWay   Kind = 0x04 // a call that is never answered
	KindCancel   Kind = 0x05 // the caller stopped waiting for a Request
	KindPing     Kind = 0x06 // asks the peer for a Pong
	KindPong     Kind = 0x07 // answers a Ping
	KindGoAway   Kind = 0x08 // the sender takes no new calls on this connection

	KindSubscribe   Kind = 0x09 // the client subscribes to a topic pattern
	KindUnsubscribe Kind = 0x0A // a subscription ends: the client's choice, or the server's (with a reason)
	KindPublish     Kind = 0x0B // the client publishes a message to a topic
	KindMessage     Kind = 0x0C // the server delivers a published message to a subscription

	KindHello   Kind = 0x10 // the client's first frame: its credentials
	KindWelcome Kind = 0x11 // the server accepts the Hello
)

// Valid reports whether k is a kind of protocol version 1.
func (k Kind) Valid() bool { return kindRules[k].name != "" }

// HasRoute reports whether frames of kind k carry a route: a call's route,
// or a topic or pattern.
func (k Kind) HasRoute() bool { return kindRules[k].route }

// HasDeadline reports whether frames of kind k may carry a deadline: calls.
func (k Kind) HasDeadline() bool { return kindRules[k].deadline }

func (k Kind) String() string {
	if k.Valid() {
		return kindRules[k].name
	}
	return "Kind(0x" + strconv.FormatUint(uint64(k), 16) + ")"
}

// Flags is the frame's bit set.
type Flags uint8

// Frame flags. Bits not listed are reserved and must be zero.
const (
	// FlagUnprocessed, on an Error, says the receiver never ran a handler for
	// the call, so the caller may safely send it again.
	FlagUnprocessed Flags = 0x01

	// FlagsCompression, bits 1 and 2, hold the Compression of the payload
	// of a Request, Response, OneWay, Message or StreamData
	// (Flags.Compression).
	FlagsCompression Flags = 0x06

	flagsDefined = FlagUnprocessed | FlagsCompression
)

// Compression returns the algorithm the payload is compressed with.
func (f Flags) Compression() Compression { return Compression(f&FlagsCompression) >> 1 }

// WithCompression returns f with its compression bits set to c.
func (f Flags) WithCompression(c Compression) Flags {
	return f&^FlagsCompression | Flags(c<<1)&FlagsCompression
}

func (f Flags) String() string {
	if f == 0 {
		return "0"
	}
	s := ""
	if f&FlagUnprocessed != 0 {
		s = "Unprocessed"
	}
	if c := f.Compression(); c != CompressionNone {
		if s != "" {
			s += "|"
		}
		s += c.String()
	}
	if rest := f &^ flagsDefined; rest != 0 {
		if s != "" {
			s += "|"
		}
		s += "0x" + strconv.FormatUint(uint64(rest), 16)
	}
	return s
}

// Compression names the algorithm a payload is compressed with, in bits 1
// and 2 of a frame's flags (docs/protocol.md, "Compression").
type Compression uint8

// Compressions. 3 is reserved.
const (
	CompressionNone Compression = 0 // the payload is as its codec says
	CompressionGzip Compression = 1 // gzip, RFC 1952
	CompressionZstd Compression = 2 // Zstandard, RFC 8878
)

var compressionNames = [...]string{CompressionNone: "none", CompressionGzip: "gzip", CompressionZstd: "zstd"}

// Valid reports whether c is a compression of protocol version 1.
func (c Compression) Valid() bool { return int(c) < len(compressionNames) }

// String returns the compression's name as the rpcd-compression metadata
// writes it: "gzip", "zstd"; "none" for CompressionNone.
func (c Compression) String() string {
	if c.Valid() {
		return compressionNames[c]
	}
	return "Compression(" + strconv.FormatUint(uint64(c), 10) + ")"
}

// ParseCompression returns the compression named name ("gzip", "zstd",
// "none" or empty), and false for a name it does not know.
func ParseCompression(name string) (Compression, bool) {
	if name == "" {
		return CompressionNone, true
	}
	for c, n := range compressionNames {
		if n == name {
			return Compression(c), true
		}
	}
	return CompressionNone, false
}

// AppendCompressionList appends the names of cs, comma-separated: the
// value of the rpcd-compression metadata.
func AppendCompressionList(dst []byte, cs ...Compression) []byte {
	for i, c := range cs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, c.String()...)
	}
	return dst
}

// ParseCompressionList returns the compressions a rpcd-compression value
// names, in its order, skipping names it does not know (a newer peer's) and
// "none".
func ParseCompressionList(v []byte) []Compression {
	var cs []Compression
	for name := range strings.SplitSeq(string(v), ",") {
		if c, ok := ParseCompression(strings.TrimSpace(name)); ok && c != CompressionNone {
			cs = append(cs, c)
		}
	}
	return cs
}

// Codec says how a payload is encoded.
type Codec uint8

// Payload codecs. 0x02-0x7F are reserved; 0x80-0xFF are for applications.
const (
	CodecRaw  Codec = 0x00 // opaque bytes
	CodecJSON Codec = 0x01 // one UTF-8 JSON value
	CodecUser Codec = 0x80 // the first of the applications' ids
)

func (c Codec) String() string {
	switch c {
	case CodecRaw:
		return "raw"
	case CodecJSON:
		return "json"
	}
	return "Codec(0x" + strconv.FormatUint(uint64(c), 16) + ")"
}

// Code is the numeric error code an Error or GoAway frame carries. The
// numbers are gRPC's.
type Code uint16

// Error codes.
const (
	CodeOK                 Code = 0
	CodeCanceled           Code = 1
	CodeUnknown            Code = 2
	CodeInvalidArgument    Code = 3
	CodeDeadlineExceeded   Code = 4
	CodeNotFound           Code = 5
	CodeAlreadyExists      Code = 6
	CodePermissionDenied   Code = 7
	CodeResourceExhausted  Code = 8
	CodeFailedPrecondition Code = 9
	CodeAborted            Code = 10
	CodeOutOfRange         Code = 11
	CodeUnimplemented      Code = 12
	CodeInternal           Code = 13
	CodeUnavailable        Code = 14
	CodeDataLoss           Code = 15
	CodeUnauthenticated    Code = 16
)

var codeNames = [...]string{
	CodeOK:                 "ok",
	CodeCanceled:           "canceled",
	CodeUnknown:            "unknown",
	CodeInvalidArgument:    "invalid argument",
	CodeDeadlineExceeded:   "deadline exceeded",
	CodeNotFound:           "not found",
	CodeAlreadyExists:      "already exists",
	CodePermissionDenied:   "permission denied",
	CodeResourceExhausted:  "resource exhausted",
	CodeFailedPrecondition: "failed precondition",
	CodeAborted:            "aborted",
	CodeOutOfRange:         "out of range",
	CodeUnimplemented:      "unimplemented",
	CodeInternal:           "internal",
	CodeUnavailable:        "unavailable",
	CodeDataLoss:           "data loss",
	CodeUnauthenticated:    "unauthenticated",
}

// String returns the code's name in lower case, as in "not found".
func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "code(" + strconv.FormatUint(uint64(c), 10) + ")"
}

// Limits bounds what a receiver accepts. A zero field takes its default.
type Limits struct {
	MaxFrameSize int // whole frame, header included; default DefaultMaxFrameSize
	MaxRoute     int // route bytes; default DefaultMaxRoute
	MaxMetadata  int // metadata bytes; default DefaultMaxMetadata
}

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	if l.MaxFrameSize <= 0 {
		l.MaxFrameSize = DefaultMaxFrameSize
	}
	if l.MaxRoute <= 0 {
		l.MaxRoute = DefaultMaxRoute
	}
	if l.MaxMetadata <= 0 {
		l.MaxMetadata = DefaultMaxMetadata
	}
	return l
}
