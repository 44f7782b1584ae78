package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readToEnd reads rd's every entry and returns how many there were and
// the error that ended them (nil for io.EOF after the end record).
func readToEnd(rd io.Reader) (int, error) {
	r, err := NewReader(rd)
	if err != nil {
		return 0, err
	}
	for n := 0; ; n++ {
		if _, err := r.Next(); err != nil {
			if errors.Is(err, io.EOF) {
				return n, nil
			}
			return n, err
		}
	}
}

// boundaries returns the offsets at which the records of the recording b
// begin, and its length.
func boundaries(b []byte) []int {
	off := FileHeaderSize + int(binary.BigEndian.Uint32(b[8:]))
	out := []int{off}
	for off < len(b) {
		off += RecordPrefixSize + int(binary.BigEndian.Uint32(b[off:]))
		out = append(out, off)
	}
	return out
}

// TestReaderTruncated: a recording cut anywhere is an error: ErrCutShort
// between two records, else a truncation naming where.
func TestReaderTruncated(t *testing.T) {
	b := readGolden(t)
	between := map[int]bool{}
	for _, off := range boundaries(b) {
		between[off] = true
	}
	for n := 0; n < len(b); n++ {
		_, err := readToEnd(bytes.NewReader(b[:n]))
		switch {
		case between[n]:
			if !errors.Is(err, ErrCutShort) {
				t.Errorf("cut at %d, between two records: %v, want ErrCutShort", n, err)
			}
		case !errors.Is(err, ErrBadFile) || !strings.Contains(err.Error(), "truncated") || !strings.Contains(err.Error(), fmt.Sprintf("offset %d", n)):
			t.Errorf("cut at %d: %v, want a truncation at offset %d", n, err, n)
		}
	}
}

// TestReaderCorrupted: any one byte changed anywhere is caught, by the
// checks of the fixed header or a CRC.
func TestReaderCorrupted(t *testing.T) {
	b := readGolden(t)
	for i := range b {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			c := bytes.Clone(b)
			c[i] ^= x
			if _, err := readToEnd(bytes.NewReader(c)); !errors.Is(err, ErrBadFile) {
				t.Errorf("byte %d ^ 0x%02x: %v, want ErrBadFile", i, x, err)
			}
		}
	}
	// The message names the record's offset.
	c := bytes.Clone(b)
	off := boundaries(b)[1]
	c[off+RecordPrefixSize+10] ^= 1
	if _, err := readToEnd(bytes.NewReader(c)); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("offset %d: record's CRC-32C", off)) {
		t.Errorf("a record's byte changed: %v", err)
	}
}

// TestReaderVersion: a file of another format version is refused by name.
func TestReaderVersion(t *testing.T) {
	b := readGolden(t)
	b[5] = 2
	_, err := NewReader(bytes.NewReader(b))
	if !errors.Is(err, ErrBadFile) || err.Error() != "rpcd: not a valid recording: offset 4: format version 2, want 1" {
		t.Errorf("version 2: %v", err)
	}
	copy(b, "RD\x01\x01")
	if _, err := NewReader(bytes.NewReader(b)); !errors.Is(err, ErrBadFile) || !strings.Contains(err.Error(), "not a recording") {
		t.Errorf("a frame, not a recording: %v", err)
	}
}

// sealed returns b with the record at off given the body body, its length
// and CRC made right, so that only the rule a test breaks is broken.
func sealed(b []byte, off int, body []byte) []byte {
	out := bytes.Clone(b[:off])
	out = binary.BigEndian.AppendUint32(out, uint32(len(body)))
	out = binary.BigEndian.AppendUint32(out, crc32.Checksum(body, castagnoli))
	return append(out, body...)
}

// withJSON returns the golden file with its header's JSON replaced by j.
func withJSON(b []byte, j string) []byte {
	n := FileHeaderSize + int(binary.BigEndian.Uint32(b[8:]))
	out := bytes.Clone(b[:8])
	out = binary.BigEndian.AppendUint32(out, uint32(len(j)))
	out = binary.BigEndian.AppendUint32(out, crc32.Checksum([]byte(j), castagnoli))
	return append(append(out, j...), b[n:]...)
}

// TestReaderLimits: a length past its bound is refused before anything is
// read or allocated for it, naming the offset; so is a frame that breaks
// the protocol even with a good CRC.
func TestReaderLimits(t *testing.T) {
	b := readGolden(t)
	first := boundaries(b)[0]
	hugeRecord := bytes.Clone(b[:first])
	hugeRecord = binary.BigEndian.AppendUint32(hugeRecord, 0xffffffff)
	hugeRecord = append(hugeRecord, 0, 0, 0, 0)
	hugeJSON := bytes.Clone(b[:8])
	hugeJSON = binary.BigEndian.AppendUint32(hugeJSON, 1<<30)
	hugeJSON = append(hugeJSON, 0, 0, 0, 0)
	frameRec := boundaries(b)[1] // the Request's record
	body := bytes.Clone(b[frameRec+RecordPrefixSize : boundaries(b)[2]])
	badFrame := bytes.Clone(body)
	badFrame[RecordHeadSize+4+3] = 0x20 // a reserved kind
	shortFrame := bytes.Clone(body[:len(body)-1])
	for _, c := range []struct {
		name, want string
		b          []byte
	}{
		{"record length 4 GiB", fmt.Sprintf("offset %d: record of 4294967295 bytes, want 20 to 4194328", first), hugeRecord},
		{"record length 19", fmt.Sprintf("offset %d: record of 19 bytes", first), sealed(b, first, make([]byte, 19))},
		{"JSON length 1 GiB", "offset 8: file header's JSON of 1073741824 bytes, more than 65536", hugeJSON},
		{"max_frame 1 GiB", "offset 16: file header: max_frame 1073741824", withJSON(b, `{"version":1,"max_frame":1073741824}`)},
		{"JSON not JSON", "offset 16: file header:", withJSON(b, `{"version":1,`)},
		{"reserved kind", fmt.Sprintf("offset %d: frame: rpcd: protocol error: unknown kind", frameRec+RecordPrefixSize+RecordHeadSize+4), sealed(b, frameRec, badFrame)},
		{"frame short of its header's length", "the frame's header announces 45 bytes, the record holds 44", sealed(b, frameRec, shortFrame)},
		{"record type 9", "record type 9", sealed(b, first, append([]byte{9}, make([]byte, 19)...))},
		{"bytes after the end", "bytes after the end record", append(bytes.Clone(b), 0)},
	} {
		_, err := readToEnd(bytes.NewReader(c.b))
		if !errors.Is(err, ErrBadFile) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	// The 4 GiB length costs no 4 GiB: the reader refuses it before it
	// reads on, with a few allocations for the error.
	if n := testing.AllocsPerRun(10, func() { readToEnd(bytes.NewReader(hugeRecord)) }); n > 40 {
		t.Errorf("reading a 4 GiB record's length allocated %v times", n)
	}
}

// FuzzReader reads arbitrary bytes as a recording, whole and a byte at a
// time: no panic, the same entries and the same error both ways, and
// every error either ErrCutShort or ErrBadFile's (or none, with an end
// record).
func FuzzReader(f *testing.F) {
	g := readGolden(&testing.T{})
	f.Add(g)
	for _, off := range boundaries(g) {
		f.Add(g[:off])
	}
	b, _ := record(&testing.T{}, Options{Answers: true}, func(r *Recorder) {
		r.TapOpen(1, addr)
		r.TapFrame(1, false, request(1, "Math/Sum", `{"a":1}`))
		r.TapFrame(1, true, response(1, "1"))
		r.TapClose(1)
	})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		n1, err1 := readToEnd(bytes.NewReader(b))
		n2, err2 := readToEnd(iotest.OneByteReader(bytes.NewReader(b)))
		if n1 != n2 || fmt.Sprint(err1) != fmt.Sprint(err2) {
			t.Fatalf("whole: %d entries, %v; a byte at a time: %d entries, %v", n1, err1, n2, err2)
		}
		if err1 != nil && !errors.Is(err1, ErrCutShort) && !errors.Is(err1, ErrBadFile) {
			t.Fatalf("error %v is neither ErrCutShort nor ErrBadFile", err1)
		}
	})
}
