package record

import (
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"strconv"
	"time"

	"github.com/rpcd/rpcd/proto"
)

// The file's constants (docs/recording.md).
const (
	// Magic opens every recording: ASCII "RDRC".
	Magic = "RDRC"
	// FormatVersion is the version of the format this package writes and
	// reads.
	FormatVersion = 1
	// FileHeaderSize is the fixed part of the file's header, before its
	// JSON object.
	FileHeaderSize = 16
	// MaxHeaderJSON bounds the file header's JSON object, in bytes.
	MaxHeaderJSON = 64 << 10
	// RecordPrefixSize is a record's length and CRC-32C, before its body.
	RecordPrefixSize = 8
	// RecordHeadSize is the part of a record's body every type has: type,
	// flags, redaction, reserved, time and connection.
	RecordHeadSize = 20
	// MaxRemote bounds an open record's address, in bytes.
	MaxRemote = 256
	// MaxFrameLimit bounds the frame limit a file's header may name
	// (max_frame): a reader never holds a record larger than it allows.
	MaxFrameLimit = 64 << 20
	// endBodySize is an end record's body: the head and five counts.
	endBodySize = RecordHeadSize + 4*8 + 1
)

// EntryType says what a record is.
type EntryType uint8

// The types of record. A Reader returns the first three as entries; the end
// record closes the file and makes Next return io.EOF.
const (
	EntryOpen  EntryType = 1 // a connection is recorded from now on
	EntryFrame EntryType = 2 // a frame, received or sent
	EntryClose EntryType = 3 // the connection closed, or its recording ended
	entryEnd   EntryType = 4 // the recording's end, with its counts
)

var entryNames = [...]string{EntryOpen: "open", EntryFrame: "frame", EntryClose: "close", entryEnd: "end"}

func (t EntryType) String() string {
	if int(t) < len(entryNames) && entryNames[t] != "" {
		return entryNames[t]
	}
	return "EntryType(" + strconv.Itoa(int(t)) + ")"
}

// flagOut, in a record's flags, marks a frame the server sent.
const flagOut = 0x01

// EndReason says why a recording ended.
type EndReason uint8

// Why a recording ends.
const (
	EndNone     EndReason = 0 // it has not ended
	EndStopped  EndReason = 1 // Stop
	EndDuration EndReason = 2 // Options.Duration passed
	EndMaxBytes EndReason = 3 // the file reached Options.MaxBytes
	EndFailed   EndReason = 4 // writing the file failed
)

var endNames = [...]string{EndNone: "running", EndStopped: "stopped", EndDuration: "duration", EndMaxBytes: "max bytes", EndFailed: "failed"}

func (e EndReason) String() string {
	if int(e) < len(endNames) {
		return endNames[e]
	}
	return "EndReason(" + strconv.Itoa(int(e)) + ")"
}

// castagnoli is CRC-32C's table: every record's body is checked with it.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is what a recording's file header says.
type Header struct {
	Version  int       // the format version, FormatVersion
	Start    time.Time // when the recording started; At counts from it
	Source   string    // "server" or "proxy"
	Server   string    // the recorded server's address
	MaxFrame int       // the largest frame a record may hold, header included
	Options  Options   // the options the recording was made with
}

// headerJSON is the file header's JSON object, as docs/recording.md names
// its fields.
type headerJSON struct {
	Version  int         `json:"version"`
	Start    time.Time   `json:"start"`
	Source   string      `json:"source"`
	Server   string      `json:"server"`
	MaxFrame int         `json:"max_frame"`
	Options  optionsJSON `json:"options"`
}

type optionsJSON struct {
	DurationNS int64           `json:"duration_ns"`
	MaxBytes   int64           `json:"max_bytes"`
	Sample     float64         `json:"sample"`
	Routes     []string        `json:"routes"`
	Redact     []redactionJSON `json:"redact"`
	Answers    bool            `json:"answers"`
}

type redactionJSON struct {
	Route  string `json:"route"`
	Action string `json:"action"`
	With   string `json:"with,omitempty"`
}

// appendFileHeader appends the file's header for h.
func appendFileHeader(dst []byte, h *Header) ([]byte, error) {
	o := &h.Options
	j := headerJSON{Version: h.Version, Start: h.Start.UTC(), Source: h.Source, Server: h.Server, MaxFrame: h.MaxFrame,
		Options: optionsJSON{DurationNS: int64(o.Duration), MaxBytes: o.MaxBytes, Sample: o.Sample, Routes: o.Routes, Answers: o.Answers}}
	if j.Options.Routes == nil {
		j.Options.Routes = []string{}
	}
	j.Options.Redact = []redactionJSON{}
	for _, r := range o.Redact {
		j.Options.Redact = append(j.Options.Redact, redactionJSON{Route: r.Route, Action: r.Action.String(), With: string(r.With)})
	}
	body, err := json.Marshal(&j)
	if err != nil {
		return dst, err
	}
	if len(body) > MaxHeaderJSON {
		return dst, errorf("the file header's JSON takes %d bytes, more than %d", len(body), MaxHeaderJSON)
	}
	dst = append(dst, Magic...)
	dst = binary.BigEndian.AppendUint16(dst, FormatVersion)
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(body)))
	dst = binary.BigEndian.AppendUint32(dst, crc32.Checksum(body, castagnoli))
	return append(dst, body...), nil
}

// parseHeaderJSON reads the file header's JSON object into h; off is its
// offset, for errors.
func parseHeaderJSON(body []byte, off int64, h *Header) error {
	var j headerJSON
	if err := json.Unmarshal(body, &j); err != nil {
		return badFile(off, "file header: %v", err)
	}
	if j.Version != FormatVersion {
		return badFile(off, "file header: version %d in its JSON, want %d", j.Version, FormatVersion)
	}
	if j.MaxFrame < proto.HeaderSize || j.MaxFrame > MaxFrameLimit {
		return badFile(off, "file header: max_frame %d, want %d to %d", j.MaxFrame, proto.HeaderSize, MaxFrameLimit)
	}
	*h = Header{Version: j.Version, Start: j.Start, Source: j.Source, Server: j.Server, MaxFrame: j.MaxFrame,
		Options: Options{Duration: time.Duration(j.Options.DurationNS), MaxBytes: j.Options.MaxBytes,
			Sample: j.Options.Sample, Routes: j.Options.Routes, Answers: j.Options.Answers, Source: j.Source, Server: j.Server}}
	for _, r := range j.Options.Redact {
		a, ok := parseAction(r.Action)
		if !ok {
			return badFile(off, "file header: redaction action %q", r.Action)
		}
		h.Options.Redact = append(h.Options.Redact, Redaction{Route: r.Route, Action: a, With: []byte(r.With)})
	}
	return nil
}

// beginRecord appends the prefix (to be filled in by finishRecord) and the
// head of a record's body, and returns the buffer and where the record
// starts.
func beginRecord(dst []byte, t EntryType, flags byte, red Action, at time.Duration, conn uint64) ([]byte, int) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, byte(t), flags, byte(red), 0)
	dst = binary.BigEndian.AppendUint64(dst, uint64(at))
	return binary.BigEndian.AppendUint64(dst, conn), start
}

// finishRecord fills in the length and CRC-32C of the record that starts
// at buf[start] and runs to the end of buf, and returns its size.
func finishRecord(buf []byte, start int) int {
	body := buf[start+RecordPrefixSize:]
	binary.BigEndian.PutUint32(buf[start:], uint32(len(body)))
	binary.BigEndian.PutUint32(buf[start+4:], crc32.Checksum(body, castagnoli))
	return len(buf) - start
}

// appendOpen appends an open record.
func appendOpen(dst []byte, at time.Duration, conn uint64, remote string) []byte {
	if len(remote) > MaxRemote {
		remote = remote[:MaxRemote]
	}
	dst, start := beginRecord(dst, EntryOpen, 0, Keep, at, conn)
	dst = append(dst, remote...)
	finishRecord(dst, start)
	return dst
}

// appendClose appends a close record.
func appendClose(dst []byte, at time.Duration, conn uint64) []byte {
	dst, start := beginRecord(dst, EntryClose, 0, Keep, at, conn)
	finishRecord(dst, start)
	return dst
}

// appendFrame appends a frame record: h is the frame's header as recorded
// (compression cleared once expanded; the payload length of what is
// stored), payloadLen the payload's length as it arrived, expanded.
func appendFrame(dst []byte, at time.Duration, conn uint64, out bool, red Action, payloadLen int,
	h proto.Header, route []byte, md proto.Metadata, payload []byte) []byte {
	var flags byte
	if out {
		flags = flagOut
	}
	dst, start := beginRecord(dst, EntryFrame, flags, red, at, conn)
	dst = binary.BigEndian.AppendUint32(dst, uint32(payloadLen))
	h.RouteLen, h.MetadataLen, h.PayloadLen = uint16(len(route)), uint16(len(md)), uint32(len(payload))
	dst = appendFrameHeader(dst, &h)
	dst = append(dst, route...)
	dst = append(dst, md...)
	dst = append(dst, payload...)
	finishRecord(dst, start)
	return dst
}

// appendFrameHeader appends h as protocol.md lays out a frame's header
// (proto's encoders take the route as a string, which would cost a copy).
func appendFrameHeader(dst []byte, h *proto.Header) []byte {
	dst = append(dst, proto.Magic0, proto.Magic1, proto.Version, byte(h.Kind), byte(h.Flags), byte(h.Codec))
	dst = binary.BigEndian.AppendUint16(dst, h.RouteLen)
	dst = binary.BigEndian.AppendUint32(dst, h.ID)
	dst = binary.BigEndian.AppendUint32(dst, h.Deadline)
	dst = binary.BigEndian.AppendUint16(dst, h.MetadataLen)
	dst = append(dst, 0, 0)
	return binary.BigEndian.AppendUint32(dst, h.PayloadLen)
}

// appendEnd appends the end record.
func appendEnd(dst []byte, at time.Duration, s *Stats) []byte {
	dst, start := beginRecord(dst, entryEnd, 0, Keep, at, 0)
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.Frames))
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.Calls))
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.Conns))
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.Lost))
	dst = append(dst, byte(s.Ended))
	finishRecord(dst, start)
	return dst
}
