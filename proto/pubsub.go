package proto

import (
	"bytes"
	"encoding/binary"
)

// Topics and patterns (docs/protocol.md, "Publish and subscribe").
//
// A topic is one or more tokens separated by '.': "orders.eu.created". A
// token is one or more route bytes (0x21-0x7E) other than '.', and '*'
// and '>' may not appear in a topic at all. A pattern is a topic whose
// tokens may also be wildcards: "*" matches exactly one token, and ">",
// only as the last token, matches one or more tokens.

// ValidTopic reports, as a protocol error, why b is not a topic; nil if it
// is one.
func ValidTopic(b []byte) error { return validTokens(b, false) }

// ValidPattern reports, as a protocol error, why b is not a pattern; nil
// if it is one.
func ValidPattern(b []byte) error { return validTokens(b, true) }

func validTokens(b []byte, wild bool) error {
	what := "topic"
	if wild {
		what = "pattern"
	}
	if len(b) == 0 {
		return errProtocol("empty %s", what)
	}
	for len(b) > 0 {
		tok := b
		rest := []byte(nil)
		if i := bytes.IndexByte(b, '.'); i >= 0 {
			tok, rest = b[:i], b[i+1:]
			if len(rest) == 0 {
				return errProtocol("%s ends with '.'", what)
			}
		}
		if len(tok) == 0 {
			return errProtocol("empty token in %s", what)
		}
		switch {
		case len(tok) == 1 && tok[0] == '*' && wild:
		case len(tok) == 1 && tok[0] == '>' && wild:
			if len(rest) > 0 {
				return errProtocol("'>' before the last token of a pattern")
			}
		default:
			for _, c := range tok {
				if c == '*' || c == '>' {
					return errProtocol("wildcard %q inside a token of a %s", c, what)
				}
				if c < 0x21 || c > 0x7e {
					return errProtocol("%s byte 0x%02x is not printable ASCII", what, c)
				}
			}
		}
		b = rest
	}
	return nil
}

// Match reports whether topic matches pattern; both are assumed valid.
func Match(pattern, topic []byte) bool {
	for {
		ptok, prest, pmore := cutToken(pattern)
		ttok, trest, tmore := cutToken(topic)
		switch {
		case len(ptok) == 1 && ptok[0] == '>':
			return true // one or more tokens are left in topic: ttok at least
		case len(ptok) == 1 && ptok[0] == '*':
		case !bytes.Equal(ptok, ttok):
			return false
		}
		if !pmore || !tmore {
			return pmore == tmore
		}
		pattern, topic = prest, trest
	}
}

// cutToken splits off b's first token; more reports whether tokens follow.
func cutToken(b []byte) (tok, rest []byte, more bool) {
	if i := bytes.IndexByte(b, '.'); i >= 0 {
		return b[:i], b[i+1:], true
	}
	return b, nil, false
}

// AppendSubscribe appends a Subscribe frame: subscription id sid (1 or
// more, chosen by the client) for pattern.
//
// takes names the compressions the subscriber takes on the subscription's
// Messages (metadata rpcd-compression, if any; docs/protocol.md,
// "Compression").
func AppendSubscribe(dst []byte, sid uint32, pattern string, takes ...Compression) []byte {
	var md Metadata
	if len(takes) > 0 {
		md = AppendMetadata(nil, MetaCompression, AppendCompressionList(nil, takes...))
	}
	return AppendFrame(dst, Header{Kind: KindSubscribe, ID: sid}, pattern, md, nil)
}

// AppendUnsubscribe appends an Unsubscribe frame ending subscription sid.
// A client ending its own subscription sends CodeOK and no message, which
// is written as no body; a server ending one sends why.
func AppendUnsubscribe(dst []byte, sid uint32, code Code, msg string) []byte {
	if code == CodeOK && msg == "" {
		return appendHeader(dst, &Header{Kind: KindUnsubscribe, ID: sid})
	}
	h := Header{Kind: KindUnsubscribe, ID: sid, PayloadLen: uint32(2 + len(msg))}
	dst = appendHeader(dst, &h)
	dst = binary.BigEndian.AppendUint16(dst, uint16(code))
	return append(dst, msg...)
}

// UnsubscribeBody returns the code and message of an Unsubscribe frame
// decoded by Decode: CodeOK and nil when it has no body.
func (f *Frame) UnsubscribeBody() (Code, []byte) {
	if len(f.Payload) < 2 {
		return CodeOK, nil
	}
	return Code(binary.BigEndian.Uint16(f.Payload)), f.Payload[2:]
}

// AppendPublish appends a Publish frame of payload, in codec, to topic.
func AppendPublish(dst []byte, topic string, codec Codec, payload []byte) []byte {
	return AppendFrame(dst, Header{Kind: KindPublish, Codec: codec}, topic, nil, payload)
}

// AppendMessage appends a Message frame delivering payload, published to
// topic in codec, to subscription sid.
func AppendMessage(dst []byte, sid uint32, topic []byte, codec Codec, payload []byte) []byte {
	h := Header{Kind: KindMessage, Codec: codec, ID: sid, RouteLen: uint16(len(topic)), PayloadLen: uint32(len(payload))}
	dst = appendHeader(dst, &h)
	dst = append(dst, topic...)
	return append(dst, payload...)
}
