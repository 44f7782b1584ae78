package proto

import (
	"encoding/binary"
	"io"
)

// Header is a frame's fixed part. Encoders compute the three lengths from
// the sections they are given.
type Header struct {
	Kind        Kind
	Flags       Flags
	Codec       Codec
	RouteLen    uint16
	ID          uint32 // call id; 0 for the kinds about the connection, for a Publish, and for an Error answering one
	Deadline    uint32 // milliseconds the caller waits; 0 means none
	MetadataLen uint16
	PayloadLen  uint32
}

// Len returns the size of the whole frame the header announces.
func (h *Header) Len() int { return frameLen(h.RouteLen, h.MetadataLen, h.PayloadLen) }

// frameLen is the length of a frame whose sections have these lengths.
func frameLen(routeLen, metaLen uint16, payloadLen uint32) int {
	return HeaderSize + int(routeLen) + int(metaLen) + int(payloadLen)
}

// Frame is a parsed frame. Route, Metadata and Payload are views into the
// bytes given to Decode.
type Frame struct {
	Header
	Route    []byte
	Metadata Metadata
	Payload  []byte
}

// Decode parses the frame at the start of b against the limits l (nil means
// the defaults).
//
// Not enough bytes is not an error. When b holds less than a header, Decode
// returns n == 0 and a nil error. When b holds a valid header but not the
// whole frame, it also returns n == 0 and a nil error, with f.Header filled
// in so that f.Len() tells how many bytes to wait for: the limits are checked
// as soon as the header is whole, before anything else is buffered.
// Otherwise it returns the frame and its length n.
//
// A frame that breaks docs/protocol.md yields an error wrapping ErrProtocol.
// Decode allocates only to build such an error.
func Decode(b []byte, l *Limits) (f Frame, n int, err error) {
	if n, err = f.Decode(b, l); err != nil {
		return Frame{}, 0, err
	}
	return f, n, nil
}

// Decode is the function Decode decoding into f, for a reader that takes
// frame after frame into the same Frame without copying it. When it
// returns n == 0 and a nil error, only f.Header is meaningful (and only if
// b held a whole header); on an error, f is undefined.
func (f *Frame) Decode(b []byte, l *Limits) (n int, err error) {
	if len(b) < HeaderSize {
		return 0, nil
	}
	if err := decodeHeader(b, l, &f.Header); err != nil {
		return 0, err
	}
	if n = f.Len(); len(b) < n {
		return 0, nil
	}
	if err := f.sections(b); err != nil {
		return 0, err
	}
	return n, nil
}

// DecodeFrame fills in the sections of f, whose Header DecodeHeader has
// accepted, from b, which holds the whole frame (f.Len() bytes or more),
// and checks them. Together the two do what Decode does, for a reader that
// learns a frame's length before it has the frame.
func DecodeFrame(f *Frame, b []byte) error {
	if len(b) < f.Len() {
		return io.ErrShortBuffer
	}
	return f.sections(b)
}

// sections fills in f's sections from b, which holds the whole frame, and
// checks them.
func (f *Frame) sections(b []byte) error {
	rl, ml, n := int(f.RouteLen), int(f.MetadataLen), f.Len()
	f.Route = b[HeaderSize : HeaderSize+rl : HeaderSize+rl]
	f.Metadata = Metadata(b[HeaderSize+rl : HeaderSize+rl+ml : HeaderSize+rl+ml])
	f.Payload = b[HeaderSize+rl+ml : n : n]
	return f.check()
}

// DecodeHeader parses and checks the fixed header at the start of b, which
// holds at least HeaderSize bytes (io.ErrShortBuffer otherwise). It is for
// readers that take the sections themselves, such as one that reads a large
// payload straight into its destination; Decode does the same checks and
// more.
func DecodeHeader(b []byte, l *Limits) (Header, error) {
	var h Header
	err := DecodeHeaderInto(&h, b, l)
	return h, err
}

// DecodeHeaderInto is DecodeHeader into *h: a reader that decodes into the
// Frame it then fills (DecodeFrame) copies no header.
func DecodeHeaderInto(h *Header, b []byte, l *Limits) error {
	if len(b) < HeaderSize {
		*h = Header{}
		return io.ErrShortBuffer
	}
	return decodeHeader(b, l, h)
}

// kindRule is everything the header of a kind may hold (docs/protocol.md,
// "Rules per kind"): decodeHeader checks a header against it, explainHeader
// says which of its rules a header breaks, and Kind's methods read it. A
// new kind is a new entry.
type kindRule struct {
	name     string // the kind's name; "" for a reserved kind
	route    bool   // a route (a topic, a pattern) is required; without, none is allowed
	deadline bool   // a deadline is allowed
	anyCodec bool   // a codec other than raw is allowed
	id       idRule
	flags    Flags // the flag bits allowed
	payload  sizeRule
}

// idRule is what call id a kind carries.
type idRule uint8

const (
	idNonZero idRule = iota // a call's, a stream's or a subscription's: 1 or more
	idZero                  // about the connection (or a topic's): 0
	idAny                   // an Error: 0 answers a Publish
)

// sizeRule bounds a kind's payload, beyond the frame limit: at least min
// bytes, at most max, never exactly one byte if notOne. what names the
// payload in an error; "" for "KIND body" (or "KIND payload" when only
// max bounds it, "KIND frame" when none is allowed).
type sizeRule struct {
	min, max uint32
	notOne   bool
	what     string
}

// unbounded is sizeRule.max for a payload bounded by the frame limit alone.
const unbounded = 1<<32 - 1

// fits reports whether a payload of n bytes keeps the rule.
func (r *sizeRule) fits(n uint32) bool {
	return n >= r.min && n <= r.max && !(r.notOne && n == 1)
}

// any, none and exactly are the common payload rules.
var (
	anyPayload = sizeRule{max: unbounded}
	noPayload  = sizeRule{}
)

func exactly(n uint32) sizeRule { return sizeRule{min: n, max: n} }

var kindRules = [256]kindRule{
	KindRequest:  {name: "Request", route: true, deadline: true, anyCodec: true, flags: FlagsCompression, payload: anyPayload},
	KindResponse: {name: "Response", anyCodec: true, flags: FlagsCompression, payload: anyPayload},
	KindError:    {name: "Error", id: idAny, flags: FlagUnprocessed, payload: sizeRule{min: 2, max: unbounded, what: "error body"}},
	KindOneWay:   {name: "OneWay", route: true, deadline: true, anyCodec: true, flags: FlagsCompression, payload: anyPayload},
	KindCancel:   {name: "Cancel", payload: sizeRule{what: "cancel frame"}},
	KindPing:     {name: "Ping", id: idZero, payload: sizeRule{max: MaxPingPayload}},
	KindPong:     {name: "Pong", id: idZero, payload: sizeRule{max: MaxPingPayload}},
	KindGoAway:   {name: "GoAway", id: idZero, payload: sizeRule{min: 6, max: unbounded, what: "go-away body"}},

	// Publish and subscribe: a pattern or topic where a call has its
	// route. An Unsubscribe's payload is empty or an error body.
	KindSubscribe:   {name: "Subscribe", route: true, payload: sizeRule{what: "subscribe frame"}},
	KindUnsubscribe: {name: "Unsubscribe", payload: sizeRule{max: unbounded, notOne: true, what: "unsubscribe body"}},
	KindPublish:     {name: "Publish", route: true, anyCodec: true, id: idZero, payload: anyPayload},
	KindMessage:     {name: "Message", route: true, anyCodec: true, flags: FlagsCompression, payload: anyPayload},

	KindHello:   {name: "Hello", id: idZero, payload: sizeRule{max: MaxHelloPayload}},
	KindWelcome: {name: "Welcome", id: idZero, payload: sizeRule{max: MaxHelloPayload}},

	// Streams: a StreamOpen and a StreamCredit carry 4 bytes (a window), a
	// StreamEnd none, a StreamReset an error body.
	KindStreamOpen:   {name: "StreamOpen", route: true, deadline: true, anyCodec: true, payload: exactly(4)},
	KindStreamData:   {name: "StreamData", flags: FlagsCompression, payload: anyPayload},
	KindStreamCredit: {name: "StreamCredit", payload: exactly(4)},
	KindStreamEnd:    {name: "StreamEnd", payload: noPayload},
	KindStreamReset:  {name: "StreamReset", flags: FlagUnprocessed, payload: sizeRule{min: 2, max: unbounded}},
}

// decodeHeader fills h from the first HeaderSize bytes of b and checks every
// rule that the header alone can break: table lookups and comparisons, with
// the message for a broken rule made by explainHeader.
func decodeHeader(b []byte, l *Limits, h *Header) error {
	_ = b[HeaderSize-1]
	// The fields into locals, checked there, then stored field by field. A
	// check that read a field back from h waited on its store: the kind's,
	// before its rules' lookup, where a quarter of this function's samples
	// fell (perf annotate, the client at 1 × 128). A composite literal is
	// built on the stack and copied in 16-byte moves, which wait for its
	// small stores to land.
	kind, flags, codec := Kind(b[3]), Flags(b[4]), Codec(b[5])
	routeLen := binary.BigEndian.Uint16(b[6:])
	id := binary.BigEndian.Uint32(b[8:])
	deadline := binary.BigEndian.Uint32(b[12:])
	metaLen := binary.BigEndian.Uint16(b[16:])
	payloadLen := binary.BigEndian.Uint32(b[20:])
	h.Kind, h.Flags, h.Codec, h.RouteLen = kind, flags, codec, routeLen
	h.ID, h.Deadline, h.MetadataLen, h.PayloadLen = id, deadline, metaLen, payloadLen
	r := &kindRules[kind]
	maxFrame, maxRoute, maxMeta := l.bounds()
	if b[0] != Magic0 || b[1] != Magic1 || b[2] != Version || b[18]|b[19] != 0 || r.name == "" ||
		flags&^r.flags != 0 || flags&FlagsCompression == FlagsCompression ||
		(codec != CodecRaw && !r.anyCodec) ||
		(deadline != 0 && !r.deadline) ||
		!r.id.allows(id) ||
		(routeLen != 0) != r.route || int(routeLen) > maxRoute ||
		int(metaLen) > maxMeta ||
		frameLen(routeLen, metaLen, payloadLen) > maxFrame ||
		!r.payload.fits(payloadLen) {
		if err := explainHeader(b, l); err != nil {
			return err
		}
		return errProtocol("header breaks a rule") // unreachable while the two agree
	}
	return nil
}

// allows reports whether a frame may carry call id.
func (r idRule) allows(id uint32) bool {
	switch r {
	case idZero:
		return id == 0
	case idAny:
		return true
	}
	return id != 0
}

// explainHeader checks the header at the start of b rule by rule, in the
// order docs/protocol.md gives them, and says which rule it breaks. It is
// the slow path of decodeHeader, run only for a header that breaks one;
// FuzzDecode checks that the two always agree.
func explainHeader(b []byte, l *Limits) error {
	if b[0] != Magic0 || b[1] != Magic1 {
		return errProtocol("bad magic 0x%02x%02x, want 0x%02x%02x", b[0], b[1], Magic0, Magic1)
	}
	if b[2] != Version {
		return errProtocol("unsupported version %d, want %d", b[2], Version)
	}
	h := &Header{
		Kind:        Kind(b[3]),
		Flags:       Flags(b[4]),
		Codec:       Codec(b[5]),
		RouteLen:    binary.BigEndian.Uint16(b[6:]),
		ID:          binary.BigEndian.Uint32(b[8:]),
		Deadline:    binary.BigEndian.Uint32(b[12:]),
		MetadataLen: binary.BigEndian.Uint16(b[16:]),
		PayloadLen:  binary.BigEndian.Uint32(b[20:]),
	}
	if r := binary.BigEndian.Uint16(b[18:]); r != 0 {
		return errProtocol("reserved header field is 0x%04x, want 0", r)
	}
	k := h.Kind
	r := &kindRules[k]
	if r.name == "" {
		return errProtocol("unknown kind %v", k)
	}
	if h.Flags&^flagsDefined != 0 {
		return errProtocol("reserved flag bits set: %v", h.Flags)
	}
	if h.Flags&FlagUnprocessed != 0 && r.flags&FlagUnprocessed == 0 {
		return errProtocol("flag Unprocessed on a %v frame", k)
	}
	if c := h.Flags.Compression(); c != CompressionNone {
		if !c.Valid() {
			return errProtocol("reserved compression %d", c)
		}
		if r.flags&FlagsCompression == 0 {
			return errProtocol("a compressed %v frame", k)
		}
	}
	if h.Codec != CodecRaw && !r.anyCodec {
		return errProtocol("codec %v on a %v frame, want raw", h.Codec, k)
	}
	if h.Deadline != 0 && !r.deadline {
		return errProtocol("deadline on a %v frame", k)
	}
	if !r.id.allows(h.ID) {
		if h.ID != 0 {
			return errProtocol("%v frame with call id %d, want 0", k, h.ID)
		}
		return errProtocol("%v frame with call id 0", k)
	}

	maxFrame, maxRoute, maxMeta := l.bounds()
	if r.route {
		if h.RouteLen == 0 {
			return errProtocol("%v frame without a route", k)
		}
		if int(h.RouteLen) > maxRoute {
			return errProtocol("route of %d bytes exceeds the limit of %d", h.RouteLen, maxRoute)
		}
	} else if h.RouteLen != 0 {
		return errProtocol("route on a %v frame", k)
	}
	if int(h.MetadataLen) > maxMeta {
		return errProtocol("metadata of %d bytes exceeds the limit of %d", h.MetadataLen, maxMeta)
	}
	if n := h.Len(); n > maxFrame {
		return errProtocol("frame of %d bytes exceeds the limit of %d", n, maxFrame)
	}
	if p := &r.payload; !p.fits(h.PayloadLen) {
		return p.explain(k, h.PayloadLen)
	}
	return nil
}

// explain says why a payload of n bytes breaks the rule of kind k.
func (p *sizeRule) explain(k Kind, n uint32) error {
	what := p.what
	switch {
	case p.max == 0:
		if what == "" {
			what = k.String() + " frame"
		}
		return errProtocol("%s with a payload of %d bytes", what, n)
	case p.notOne && n == 1:
		return errProtocol("%s of 1 byte, want none or at least 2", what)
	case p.min == 0:
		if what == "" {
			what = k.String() + " payload"
		}
		return errProtocol("%s of %d bytes exceeds %d", what, n, p.max)
	}
	if what == "" {
		what = k.String() + " body"
	}
	if p.min == p.max {
		return errProtocol("%s of %d bytes, want %d", what, n, p.min)
	}
	return errProtocol("%s of %d bytes, want at least %d", what, n, p.min)
}

// check enforces the rules on the sections of a whole frame.
func (f *Frame) check() error {
	if !printable(f.Route) {
		for _, c := range f.Route {
			if c < 0x21 || c > 0x7e {
				return errProtocol("route byte 0x%02x is not printable ASCII", c)
			}
		}
	}
	switch f.Kind {
	case KindStreamOpen, KindStreamCredit:
		if err := f.checkStream(); err != nil {
			return err
		}
	case KindSubscribe:
		if err := ValidPattern(f.Route); err != nil {
			return err
		}
	case KindPublish, KindMessage:
		if err := ValidTopic(f.Route); err != nil {
			return err
		}
	}
	if len(f.Metadata) == 0 {
		return nil
	}
	return f.Metadata.Validate()
}

// printable reports whether every byte of b is in 0x21-0x7e, eight bytes
// at a time (the last eight overlapping the eight before them, rather than
// a byte at a time): a byte below 0x21 borrows into its high bit when 0x21
// is taken from it, and one above 0x7e carries into it when 1 is added.
func printable(b []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	bad := func(x uint64) bool { return ((x-ones*0x21)&^x|(x+ones*1)|x)&highs != 0 }
	n := len(b)
	if n < 8 {
		for _, c := range b {
			if c < 0x21 || c > 0x7e {
				return false
			}
		}
		return true
	}
	for i := 0; i < n-8; i += 8 {
		if bad(binary.LittleEndian.Uint64(b[i:])) {
			return false
		}
	}
	return !bad(binary.LittleEndian.Uint64(b[n-8:])) // the last eight, overlapping
}

// ErrorBody returns the code and message of an Error frame decoded by Decode.
func (f *Frame) ErrorBody() (Code, []byte) {
	if len(f.Payload) < 2 {
		return CodeUnknown, nil
	}
	return Code(binary.BigEndian.Uint16(f.Payload)), f.Payload[2:]
}

// GoAwayBody returns the last call id, code and message of a GoAway frame
// decoded by Decode.
func (f *Frame) GoAwayBody() (last uint32, code Code, msg []byte) {
	if len(f.Payload) < 6 {
		return 0, CodeUnknown, nil
	}
	return binary.BigEndian.Uint32(f.Payload), Code(binary.BigEndian.Uint16(f.Payload[4:])), f.Payload[6:]
}

// FrameLen returns the length of the whole frame whose 24-byte header
// begins h, from its three length fields alone, unchecked: for a frame its
// writer made (a receiver checks a header with DecodeHeader first).
func FrameLen(h []byte) int {
	return HeaderSize + int(binary.BigEndian.Uint16(h[6:])) + int(binary.BigEndian.Uint16(h[16:])) + int(binary.BigEndian.Uint32(h[20:]))
}

// After reports whether call id a comes after call id b in serial-number
// arithmetic (RFC 1982), as GoAway's last call id is compared.
func After(a, b uint32) bool { return int32(a-b) > 0 }

// AppendFrame appends a frame to dst: h's kind, flags, codec, call id and
// deadline, then route, md and payload. The lengths in h are ignored; they are
// taken from the sections. The caller keeps each section within the limits.
func AppendFrame(dst []byte, h Header, route string, md Metadata, payload []byte) []byte {
	h.RouteLen = uint16(len(route))
	h.MetadataLen = uint16(len(md))
	h.PayloadLen = uint32(len(payload))
	dst = appendHeader(dst, &h)
	dst = append(dst, route...)
	dst = append(dst, md...)
	return append(dst, payload...)
}

// AppendRequest appends a Request without metadata, its header's fields
// given one by one: AppendFrame's frame, with no Header to copy in (a copy
// of a Header just stored field by field waits for the stores).
func AppendRequest(dst []byte, id uint32, flags Flags, codec Codec, deadline uint32, route string, payload []byte) []byte {
	dst = appendHeaderOf(dst, KindRequest, flags, codec, uint16(len(route)), id, deadline, 0, uint32(len(payload)))
	dst = append(dst, route...)
	return append(dst, payload...)
}

// AppendHead appends the header, route and metadata of a frame whose
// payload, of payloadLen bytes, the caller sends right after them from
// elsewhere (with writev, say) rather than copying it in.
func AppendHead(dst []byte, h Header, route string, md Metadata, payloadLen int) []byte {
	h.RouteLen = uint16(len(route))
	h.MetadataLen = uint16(len(md))
	h.PayloadLen = uint32(payloadLen)
	dst = appendHeader(dst, &h)
	dst = append(dst, route...)
	return append(dst, md...)
}

// BeginFrame appends the header, route and metadata of a frame whose payload
// the caller appends next, in place; FinishFrame then sets the payload length.
// It returns the extended buffer and the offset at which the frame starts.
func BeginFrame(dst []byte, h Header, route string, md Metadata) ([]byte, int) {
	start := len(dst)
	h.RouteLen = uint16(len(route))
	h.MetadataLen = uint16(len(md))
	h.PayloadLen = 0
	dst = appendHeader(dst, &h)
	dst = append(dst, route...)
	return append(dst, md...), start
}

// BeginResponse is BeginFrame for a Response to call id in codec: no route,
// no metadata.
func BeginResponse(dst []byte, id uint32, codec Codec) ([]byte, int) {
	h := Header{Kind: KindResponse, Codec: codec, ID: id}
	return appendHeader(dst, &h), len(dst)
}

// FinishFrame sets the payload length of the frame that BeginFrame started at
// offset start of buf: everything after its metadata, up to len(buf). It
// returns the frame's whole length.
func FinishFrame(buf []byte, start int) int { return FinishFrameWith(buf, start, 0) }

// FinishFrameWith is FinishFrame for a frame whose payload goes on past
// len(buf) for more bytes, written after buf from elsewhere.
func FinishFrameWith(buf []byte, start, more int) int {
	h := buf[start:]
	payload := len(h) - HeaderSize - int(binary.BigEndian.Uint16(h[6:])) - int(binary.BigEndian.Uint16(h[16:])) + more
	binary.BigEndian.PutUint32(h[20:], uint32(payload))
	return len(h) + more
}

func appendHeader(dst []byte, h *Header) []byte {
	return appendHeaderOf(dst, h.Kind, h.Flags, h.Codec, h.RouteLen, h.ID, h.Deadline, h.MetadataLen, h.PayloadLen)
}

// appendHeaderOf is appendHeader with the fields one by one.
func appendHeaderOf(dst []byte, kind Kind, flags Flags, codec Codec, routeLen uint16, id, deadline uint32, mdLen uint16, payloadLen uint32) []byte {
	n := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...) // grows in place; no allocation when it fits
	b := dst[n : n+HeaderSize : n+HeaderSize]
	b[0], b[1], b[2] = Magic0, Magic1, Version
	b[3], b[4], b[5] = byte(kind), byte(flags), byte(codec)
	binary.BigEndian.PutUint16(b[6:], routeLen)
	binary.BigEndian.PutUint32(b[8:], id)
	binary.BigEndian.PutUint32(b[12:], deadline)
	binary.BigEndian.PutUint16(b[16:], mdLen)
	binary.BigEndian.PutUint32(b[20:], payloadLen)
	return dst
}

// AppendError appends an Error frame answering call id with code and msg.
// Id 0 answers a Publish: the server refused it (docs/protocol.md,
// "Publish and subscribe").
func AppendError(dst []byte, id uint32, flags Flags, code Code, msg string) []byte {
	h := Header{Kind: KindError, Flags: flags, ID: id, PayloadLen: uint32(2 + len(msg))}
	dst = appendHeader(dst, &h)
	dst = binary.BigEndian.AppendUint16(dst, uint16(code))
	return append(dst, msg...)
}

// AppendGoAway appends a GoAway frame naming the last call id the sender
// will answer, with a code and a reason.
func AppendGoAway(dst []byte, last uint32, code Code, msg string) []byte {
	h := Header{Kind: KindGoAway, PayloadLen: uint32(6 + len(msg))}
	dst = appendHeader(dst, &h)
	dst = binary.BigEndian.AppendUint32(dst, last)
	dst = binary.BigEndian.AppendUint16(dst, uint16(code))
	return append(dst, msg...)
}

// AppendCancel appends a Cancel frame for the caller's call id.
func AppendCancel(dst []byte, id uint32) []byte {
	h := Header{Kind: KindCancel, ID: id}
	return appendHeader(dst, &h)
}

// AppendPing appends a Ping frame; payload holds at most MaxPingPayload bytes.
func AppendPing(dst []byte, payload []byte) []byte {
	return AppendFrame(dst, Header{Kind: KindPing}, "", nil, payload)
}

// AppendHello appends the Hello that opens a connection: the method (in
// metadata, rpcd-auth-method, if not empty), the compressions the client
// takes (rpcd-compression, if any) and the credentials.
func AppendHello(dst []byte, method string, credentials []byte, takes ...Compression) []byte {
	var md Metadata
	if method != "" {
		md = AppendMetadata(md, MetaAuthMethod, []byte(method))
	}
	if len(takes) > 0 {
		md = AppendMetadata(md, MetaCompression, AppendCompressionList(nil, takes...))
	}
	return AppendFrame(dst, Header{Kind: KindHello}, "", md, credentials)
}

// AppendWelcome appends the Welcome that accepts a Hello, naming the
// identity the server knows the peer by and the compressions the server
// takes (rpcd-compression, if any).
func AppendWelcome(dst []byte, identity string, takes ...Compression) []byte {
	var md Metadata
	if len(takes) > 0 {
		md = AppendMetadata(md, MetaCompression, AppendCompressionList(nil, takes...))
	}
	return AppendFrame(dst, Header{Kind: KindWelcome}, "", md, []byte(identity))
}

// PayloadRoom returns the most payload bytes a frame with h's route and
// metadata may hold within a frame limit of maxFrame bytes: what a
// compressed payload may expand to (docs/protocol.md, "Compression").
func (h *Header) PayloadRoom(maxFrame int) int {
	return maxFrame - HeaderSize - int(h.RouteLen) - int(h.MetadataLen)
}

// SetCompression sets the compression bits of the encoded frame that
// starts at b[0]: its payload has been compressed with c.
func SetCompression(b []byte, c Compression) {
	b[4] = byte(Flags(b[4]).WithCompression(c))
}

// AppendPong appends the Pong that answers a Ping with payload.
func AppendPong(dst []byte, payload []byte) []byte {
	return AppendFrame(dst, Header{Kind: KindPong}, "", nil, payload)
}

// bounds returns the limits l sets, with the defaults for its zero fields
// (Limits.WithDefaults) and for a nil l.
func (l *Limits) bounds() (frame, route, metadata int) {
	var d Limits
	if l != nil {
		d = *l
	}
	d = d.WithDefaults()
	return d.MaxFrameSize, d.MaxRoute, d.MaxMetadata
}
