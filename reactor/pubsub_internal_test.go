package reactor

import (
	"bytes"
	"testing"

	"github.com/rpcd/rpcd/proto"
)

// TestPackedPayloadOnce: a publish's payload is compressed once per
// compression, however many subscribers take it; one that does not shrink
// goes as it is to all of them.
func TestPackedPayloadOnce(t *testing.T) {
	doc := bytes.Repeat([]byte("an event much like the others; "), 100)
	var p packedPayload
	defer p.release()
	first, zip := p.get(doc, proto.CompressionZstd)
	if zip != proto.CompressionZstd || len(first) >= len(doc) {
		t.Fatalf("%d bytes in %v", len(first), zip)
	}
	for range 3 {
		if again, _ := p.get(doc, proto.CompressionZstd); &again[0] != &first[0] {
			t.Fatal("the payload was compressed again for another subscriber")
		}
	}
	if gz, zip := p.get(doc, proto.CompressionGzip); zip != proto.CompressionGzip || &gz[0] == &first[0] {
		t.Fatalf("gzip: %v, the zstd bytes %v", zip, &gz[0] == &first[0])
	}
	var q packedPayload
	defer q.release()
	noise := []byte("x9#")
	if b, zip := q.get(noise, proto.CompressionZstd); zip != proto.CompressionNone || &b[0] != &noise[0] {
		t.Fatalf("a payload that does not shrink came back in %v", zip)
	}
}
