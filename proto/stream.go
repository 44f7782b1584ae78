package proto

import "encoding/binary"

// Streams (docs/protocol.md, "Streams"): flow-controlled byte streams
// between the two peers of a connection, opened by either of them to a
// route. The call id field carries the stream id, chosen by the peer that
// opens the stream: odd when the client opens it, even when the server
// does, so a stream id names one stream whoever sends the frame.

// Stream frame kinds.
const (
	KindStreamOpen   Kind = 0x18 // opens a stream to a route and grants the first window
	KindStreamData   Kind = 0x19 // bytes of a stream, within the credit the receiver granted
	KindStreamCredit Kind = 0x1A // the receiver grants more bytes of window
	KindStreamEnd    Kind = 0x1B // the sender sends no more data on the stream (half-close)
	KindStreamReset  Kind = 0x1C // the stream ends at once, in both directions, with a code
)

// MaxStreamWindow is the most a window or a credit may hold: 2^31-1 bytes.
const MaxStreamWindow = 1<<31 - 1

// StreamOpenedByClient reports whether stream id belongs to a stream the
// client opened (odd ids); the server opens even ones.
func StreamOpenedByClient(id uint32) bool { return id&1 == 1 }

// AppendStreamOpen appends a StreamOpen frame for stream id to route, with
// the stream's codec, deadline (milliseconds, 0 for none), metadata and the
// window the opener grants: the bytes the other peer may send before it
// grants more.
func AppendStreamOpen(dst []byte, id uint32, route string, codec Codec, deadline uint32, md Metadata, window uint32) []byte {
	var w [4]byte
	binary.BigEndian.PutUint32(w[:], window)
	return AppendFrame(dst, Header{Kind: KindStreamOpen, Codec: codec, ID: id, Deadline: deadline}, route, md, w[:])
}

// AppendStreamData appends a StreamData frame carrying data on stream id.
func AppendStreamData(dst []byte, id uint32, data []byte) []byte {
	return AppendFrame(dst, Header{Kind: KindStreamData, ID: id}, "", nil, data)
}

// AppendStreamCredit appends a StreamCredit frame granting n more bytes on
// stream id (1 to MaxStreamWindow).
func AppendStreamCredit(dst []byte, id uint32, n uint32) []byte {
	h := Header{Kind: KindStreamCredit, ID: id, PayloadLen: 4}
	dst = appendHeader(dst, &h)
	return binary.BigEndian.AppendUint32(dst, n)
}

// AppendFirstStreamCredit appends the acceptor's first StreamCredit on
// stream id, granting n bytes and naming in its metadata (rpcd-compression)
// the compressions the acceptor takes on the stream's StreamData: its
// answer to a StreamOpen that named its own (docs/protocol.md,
// "Compression"). With none, it is AppendStreamCredit.
func AppendFirstStreamCredit(dst []byte, id uint32, n uint32, takes ...Compression) []byte {
	if len(takes) == 0 {
		return AppendStreamCredit(dst, id, n)
	}
	var w [4]byte
	binary.BigEndian.PutUint32(w[:], n)
	md := AppendMetadata(nil, MetaCompression, AppendCompressionList(nil, takes...))
	return AppendFrame(dst, Header{Kind: KindStreamCredit, ID: id}, "", md, w[:])
}

// AppendStreamEnd appends a StreamEnd frame: no more data from the sender
// on stream id.
func AppendStreamEnd(dst []byte, id uint32) []byte {
	h := Header{Kind: KindStreamEnd, ID: id}
	return appendHeader(dst, &h)
}

// AppendStreamReset appends a StreamReset frame ending stream id with code
// and msg; flags may hold FlagUnprocessed (the stream's handler never ran).
func AppendStreamReset(dst []byte, id uint32, flags Flags, code Code, msg string) []byte {
	h := Header{Kind: KindStreamReset, Flags: flags, ID: id, PayloadLen: uint32(2 + len(msg))}
	dst = appendHeader(dst, &h)
	dst = binary.BigEndian.AppendUint16(dst, uint16(code))
	return append(dst, msg...)
}

// StreamWindow returns the window of a StreamOpen frame, or the credit of
// a StreamCredit frame, decoded by Decode.
func (f *Frame) StreamWindow() uint32 {
	if len(f.Payload) < 4 {
		return 0
	}
	return binary.BigEndian.Uint32(f.Payload)
}

// checkStream enforces the rules on a stream frame's body that its header
// cannot show.
func (f *Frame) checkStream() error {
	switch f.Kind {
	case KindStreamOpen:
		if w := f.StreamWindow(); w > MaxStreamWindow {
			return errProtocol("stream window of %d bytes exceeds %d", w, MaxStreamWindow)
		}
	case KindStreamCredit:
		if w := f.StreamWindow(); w == 0 || w > MaxStreamWindow {
			return errProtocol("stream credit of %d bytes, want 1 to %d", w, MaxStreamWindow)
		}
	}
	return nil
}
