package record

import (
	"bufio"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"time"

	"github.com/rpcd/rpcd/proto"
)

// Entry is one record of a recording: a connection's open or close, or a
// frame.
type Entry struct {
	Type       EntryType
	At         time.Duration // since the recording started
	Conn       uint64
	Out        bool        // a frame the server sent (an answer)
	Frame      proto.Frame // decoded; its payload expanded (compression cleared) unless it did not expand; slices valid until the next Next
	PayloadLen int         // the payload's length as it arrived, expanded (a dropped payload has none in Frame)
	Redacted   Action      // Keep unless redaction dropped or replaced the payload
	Remote     string      // EntryOpen: the peer's address, "" where unknown
}

// Reader reads a recording, checking it as it goes: every length against
// its bound before anything is allocated for it, every record's CRC-32C,
// every frame against protocol.md's rules.
type Reader struct {
	br     *bufio.Reader
	closer io.Closer
	off    int64 // of the next byte to read
	hdr    Header
	limits proto.Limits
	buf    []byte
	end    Stats
	endAt  time.Duration
	ended  bool  // the end record was read
	err    error // sticky
}

// Open opens the recording at path and reads its header.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errorf("%w", err)
	}
	r, err := NewReader(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.closer = f
	return r, nil
}

// NewReader reads a recording's header from rd and returns a Reader of its
// records.
func NewReader(rd io.Reader) (*Reader, error) {
	r := &Reader{br: bufio.NewReaderSize(rd, 64<<10)}
	var fixed [FileHeaderSize]byte
	if err := r.full(fixed[:], "the file header"); err != nil {
		return nil, err
	}
	if string(fixed[:4]) != Magic {
		return nil, badFile(0, "magic % x, want % x (%q): not a recording", fixed[:4], Magic, Magic)
	}
	if v := binary.BigEndian.Uint16(fixed[4:]); v != FormatVersion {
		return nil, badFile(4, "format version %d, want %d", v, FormatVersion)
	}
	if v := binary.BigEndian.Uint16(fixed[6:]); v != 0 {
		return nil, badFile(6, "reserved field 0x%04x, want 0", v)
	}
	n := binary.BigEndian.Uint32(fixed[8:])
	if n > MaxHeaderJSON {
		return nil, badFile(8, "file header's JSON of %d bytes, more than %d", n, MaxHeaderJSON)
	}
	body := make([]byte, n)
	if err := r.full(body, "the file header's JSON"); err != nil {
		return nil, err
	}
	if sum := crc32.Checksum(body, castagnoli); sum != binary.BigEndian.Uint32(fixed[12:]) {
		return nil, badFile(12, "file header's CRC-32C 0x%08x, its JSON's is 0x%08x: corrupted", binary.BigEndian.Uint32(fixed[12:]), sum)
	}
	if err := parseHeaderJSON(body, FileHeaderSize, &r.hdr); err != nil {
		return nil, err
	}
	r.limits = proto.Limits{MaxFrameSize: r.hdr.MaxFrame}.WithDefaults()
	return r, nil
}

// full reads len(b) bytes, or fails naming what was cut short and where.
func (r *Reader) full(b []byte, what string) error {
	n, err := io.ReadFull(r.br, b)
	r.off += int64(n)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return badFile(r.off, "truncated: %s ends after %d of its %d bytes", what, n, len(b))
	}
	return errorf("reading the recording at offset %d: %w", r.off, err)
}

// Header returns what the file's header says.
func (r *Reader) Header() Header { return r.hdr }

// End returns the end record's figures and time (how long the recording
// ran), once Next has returned io.EOF. Bytes is the file's length.
func (r *Reader) End() (s Stats, at time.Duration, ok bool) { return r.end, r.endAt, r.ended }

// Offset returns the offset of the next record.
func (r *Reader) Offset() int64 { return r.off }

// Close closes the file Open opened; for a NewReader's Reader it does
// nothing.
func (r *Reader) Close() error {
	if r.closer == nil {
		return nil
	}
	return r.closer.Close()
}

// Next returns the next entry. After the end record it returns io.EOF. A
// file that ends between two records without one gives ErrCutShort; one
// that is truncated, corrupted, or breaks a bound gives an error wrapping
// ErrBadFile that names the offset. Errors are sticky.
func (r *Reader) Next() (Entry, error) {
	if r.err != nil {
		return Entry{}, r.err
	}
	e, err := r.next()
	if err != nil {
		r.err = err
	}
	return e, err
}

func (r *Reader) next() (Entry, error) {
	at := r.off
	if r.ended {
		if _, err := r.br.Peek(1); err == nil {
			return Entry{}, badFile(at, "bytes after the end record")
		}
		return Entry{}, io.EOF
	}
	var prefix [RecordPrefixSize]byte
	if _, err := r.br.Peek(1); errors.Is(err, io.EOF) {
		return Entry{}, ErrCutShort
	}
	if err := r.full(prefix[:], "a record's length and CRC"); err != nil {
		return Entry{}, err
	}
	n := binary.BigEndian.Uint32(prefix[:])
	if max := uint32(RecordHeadSize + 4 + r.limits.MaxFrameSize); n < RecordHeadSize || n > max {
		return Entry{}, badFile(at, "record of %d bytes, want %d to %d", n, RecordHeadSize, max)
	}
	if cap(r.buf) < int(n) {
		r.buf = make([]byte, n)
	}
	body := r.buf[:n]
	if err := r.full(body, "a record"); err != nil {
		return Entry{}, err
	}
	if sum := crc32.Checksum(body, castagnoli); sum != binary.BigEndian.Uint32(prefix[4:]) {
		return Entry{}, badFile(at, "record's CRC-32C 0x%08x, its body's is 0x%08x: corrupted", binary.BigEndian.Uint32(prefix[4:]), sum)
	}
	return r.parse(body, at)
}

// parse reads a record's body, found at offset at.
func (r *Reader) parse(b []byte, at int64) (Entry, error) {
	e := Entry{Type: EntryType(b[0]), Redacted: Action(b[2]),
		At: time.Duration(binary.BigEndian.Uint64(b[4:])), Conn: binary.BigEndian.Uint64(b[12:])}
	flags, rest := b[1], b[RecordHeadSize:]
	at += RecordPrefixSize
	if b[3] != 0 {
		return e, badFile(at+3, "reserved byte 0x%02x, want 0", b[3])
	}
	if e.At < 0 {
		return e, badFile(at+4, "time %d ns is negative", uint64(e.At))
	}
	if e.Type != EntryFrame && (flags != 0 || e.Redacted != Keep) {
		return e, badFile(at+1, "%v record with flags 0x%02x and redaction %d, want 0", e.Type, flags, b[2])
	}
	switch e.Type {
	case EntryOpen:
		if len(rest) > MaxRemote {
			return e, badFile(at, "open record's address of %d bytes, more than %d", len(rest), MaxRemote)
		}
		e.Remote = string(rest)
	case EntryClose:
		if len(rest) != 0 {
			return e, badFile(at, "close record of %d bytes, want %d", len(b), RecordHeadSize)
		}
	case entryEnd:
		if len(b) != endBodySize {
			return e, badFile(at, "end record of %d bytes, want %d", len(b), endBodySize)
		}
		r.end = Stats{Frames: int64(binary.BigEndian.Uint64(rest)), Calls: int64(binary.BigEndian.Uint64(rest[8:])),
			Conns: int64(binary.BigEndian.Uint64(rest[16:])), Lost: int64(binary.BigEndian.Uint64(rest[24:])),
			Ended: EndReason(rest[32]), Bytes: r.off}
		r.endAt, r.ended = e.At, true
		return r.next()
	case EntryFrame:
		if flags&^flagOut != 0 {
			return e, badFile(at+1, "frame record's flags 0x%02x, want 0 or 0x01", flags)
		}
		if e.Redacted > Replace {
			return e, badFile(at+2, "redaction %d, want 0 to 2", b[2])
		}
		e.Out = flags&flagOut != 0
		if len(rest) < 4+proto.HeaderSize {
			return e, badFile(at, "frame record of %d bytes, want at least %d", len(b), RecordHeadSize+4+proto.HeaderSize)
		}
		e.PayloadLen = int(binary.BigEndian.Uint32(rest))
		if e.PayloadLen > r.limits.MaxFrameSize {
			return e, badFile(at+RecordHeadSize, "payload length %d past the frame limit %d", e.PayloadLen, r.limits.MaxFrameSize)
		}
		n, err := e.Frame.Decode(rest[4:], &r.limits)
		if err == nil && n != len(rest)-4 {
			return e, badFile(at+RecordHeadSize+4, "the frame's header announces %d bytes, the record holds %d", e.Frame.Len(), len(rest)-4)
		}
		if err != nil {
			return e, badFile(at+RecordHeadSize+4, "frame: %v", err)
		}
		if e.Redacted == Keep && e.Frame.Flags.Compression() == proto.CompressionNone && len(e.Frame.Payload) != e.PayloadLen {
			return e, badFile(at+RecordHeadSize, "payload length %d, the frame holds %d and is not redacted", e.PayloadLen, len(e.Frame.Payload))
		}
	default:
		return e, badFile(at, "record type %d, want 1 to 4", b[0])
	}
	return e, nil
}
