package proto

import (
	"slices"
	"testing"
)

// TestWireConstants pins every constant of docs/protocol.md. Changing one is
// changing the protocol: bump Version and the document together.
func TestWireConstants(t *testing.T) {
	pins := []struct {
		name      string
		got, want uint64
	}{
		{"Magic0", uint64(Magic0), 0x52},
		{"Magic1", uint64(Magic1), 0x44},
		{"Version", uint64(Version), 0x01},
		{"HeaderSize", HeaderSize, 24},
		{"DefaultMaxFrameSize", DefaultMaxFrameSize, 4194304},
		{"DefaultMaxRoute", DefaultMaxRoute, 256},
		{"DefaultMaxMetadata", DefaultMaxMetadata, 8192},
		{"MaxPingPayload", MaxPingPayload, 64},

		{"KindRequest", uint64(KindRequest), 0x01},
		{"KindResponse", uint64(KindResponse), 0x02},
		{"KindError", uint64(KindError), 0x03},
		{"KindOneWay", uint64(KindOneWay), 0x04},
		{"KindCancel", uint64(KindCancel), 0x05},
		{"KindPing", uint64(KindPing), 0x06},
		{"KindPong", uint64(KindPong), 0x07},
		{"KindGoAway", uint64(KindGoAway), 0x08},
		{"KindHello", uint64(KindHello), 0x10},
		{"KindWelcome", uint64(KindWelcome), 0x11},
		{"MaxHelloPayload", MaxHelloPayload, 4096},

		{"FlagUnprocessed", uint64(FlagUnprocessed), 0x01},

		{"CodecRaw", uint64(CodecRaw), 0x00},
		{"CodecJSON", uint64(CodecJSON), 0x01},

		{"CodeOK", uint64(CodeOK), 0},
		{"CodeCanceled", uint64(CodeCanceled), 1},
		{"CodeUnknown", uint64(CodeUnknown), 2},
		{"CodeInvalidArgument", uint64(CodeInvalidArgument), 3},
		{"CodeDeadlineExceeded", uint64(CodeDeadlineExceeded), 4},
		{"CodeNotFound", uint64(CodeNotFound), 5},
		{"CodeAlreadyExists", uint64(CodeAlreadyExists), 6},
		{"CodePermissionDenied", uint64(CodePermissionDenied), 7},
		{"CodeResourceExhausted", uint64(CodeResourceExhausted), 8},
		{"CodeFailedPrecondition", uint64(CodeFailedPrecondition), 9},
		{"CodeAborted", uint64(CodeAborted), 10},
		{"CodeOutOfRange", uint64(CodeOutOfRange), 11},
		{"CodeUnimplemented", uint64(CodeUnimplemented), 12},
		{"CodeInternal", uint64(CodeInternal), 13},
		{"CodeUnavailable", uint64(CodeUnavailable), 14},
		{"CodeDataLoss", uint64(CodeDataLoss), 15},
		{"CodeUnauthenticated", uint64(CodeUnauthenticated), 16},
	}
	for _, p := range pins {
		if p.got != p.want {
			t.Errorf("%s = %#x, want %#x (docs/protocol.md)", p.name, p.got, p.want)
		}
	}
}

// TestHeaderOffsets pins where each field sits in the 24 header bytes.
func TestHeaderOffsets(t *testing.T) {
	h := Header{Kind: 0xA1, Flags: 0xB2, Codec: 0xC3, ID: 0x0D0E0F10, Deadline: 0x11121314}
	b := AppendFrame(nil, h, "r", Metadata{0x01, 'k', 0x00, 0x00}, []byte{0xEE, 0xEE})
	want := []byte{
		0x52, 0x44, 0x01, 0xA1, // magic, version, kind
		0xB2, 0xC3, 0x00, 0x01, // flags, codec, route length
		0x0D, 0x0E, 0x0F, 0x10, // call id
		0x11, 0x12, 0x13, 0x14, // deadline
		0x00, 0x04, 0x00, 0x00, // metadata length, reserved
		0x00, 0x00, 0x00, 0x02, // payload length
		'r',                   // route
		0x01, 'k', 0x00, 0x00, // metadata
		0xEE, 0xEE, // payload
	}
	if string(b) != string(want) {
		t.Fatalf("frame bytes\n got % x\nwant % x", b, want)
	}
}

func TestMetadataKeys(t *testing.T) {
	if MetaAuthMethod != "rpcd-auth-method" {
		t.Errorf("MetaAuthMethod = %q, want rpcd-auth-method (docs/protocol.md)", MetaAuthMethod)
	}
	if MetaCompression != "rpcd-compression" {
		t.Errorf("MetaCompression = %q, want rpcd-compression (docs/protocol.md)", MetaCompression)
	}
}

// TestCompressionBits pins the compression ids and their place in the
// flags (docs/protocol.md, "Compression").
func TestCompressionBits(t *testing.T) {
	if CompressionNone != 0 || CompressionGzip != 1 || CompressionZstd != 2 || FlagsCompression != 0x06 {
		t.Fatalf("compression constants moved: none %d, gzip %d, zstd %d, bits %#x", CompressionNone, CompressionGzip, CompressionZstd, FlagsCompression)
	}
	for _, tc := range []struct {
		flags Flags
		c     Compression
	}{{0x00, CompressionNone}, {0x02, CompressionGzip}, {0x04, CompressionZstd}, {0x05, CompressionZstd}, {0x07, 3}} {
		if got := tc.flags.Compression(); got != tc.c {
			t.Errorf("Flags(%#x).Compression() = %v, want %v", byte(tc.flags), got, tc.c)
		}
	}
	if f := FlagUnprocessed.WithCompression(CompressionZstd); f != 0x05 {
		t.Errorf("WithCompression kept %#x, want 0x05", byte(f))
	}
	if f := Flags(0x07).WithCompression(CompressionNone); f != FlagUnprocessed {
		t.Errorf("WithCompression(None) left %#x, want 0x01", byte(f))
	}
	for _, tc := range []struct {
		in   string
		want []Compression
	}{
		{"zstd,gzip", []Compression{CompressionZstd, CompressionGzip}},
		{" gzip , brotli,zstd,none", []Compression{CompressionGzip, CompressionZstd}},
		{"", nil},
	} {
		if got := ParseCompressionList([]byte(tc.in)); !slices.Equal(got, tc.want) {
			t.Errorf("ParseCompressionList(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if got := string(AppendCompressionList(nil, CompressionZstd, CompressionGzip)); got != "zstd,gzip" {
		t.Errorf("AppendCompressionList = %q, want zstd,gzip", got)
	}
	for _, name := range []string{"zstd", "gzip", "none", ""} {
		if c, ok := ParseCompression(name); !ok || (name != "" && c.String() != name) {
			t.Errorf("ParseCompression(%q) = %v, %v", name, c, ok)
		}
	}
	if _, ok := ParseCompression("lz4"); ok {
		t.Error("ParseCompression took lz4")
	}
}

func TestStringers(t *testing.T) {
	cases := []struct{ got, want string }{
		{KindRequest.String(), "Request"},
		{KindGoAway.String(), "GoAway"},
		{Kind(0x42).String(), "Kind(0x42)"},
		{FlagUnprocessed.String(), "Unprocessed"},
		{Flags(0x03).String(), "Unprocessed|gzip"},
		{Flags(0x04).String(), "zstd"},
		{Flags(0x86).String(), "Compression(3)|0x80"},
		{CompressionZstd.String(), "zstd"},
		{Compression(7).String(), "Compression(7)"},
		{Flags(0).String(), "0"},
		{CodecJSON.String(), "json"},
		{Codec(0x80).String(), "Codec(0x80)"},
		{CodeNotFound.String(), "not found"},
		{Code(99).String(), "code(99)"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
