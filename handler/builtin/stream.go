package builtin

import (
	"context"
	"encoding/binary"
	"io"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// The stream routes of rpcd bench's stream goodput scenarios.
const (
	// StreamSink reads its stream to the end and answers the number of
	// bytes it read, 8 bytes big-endian.
	StreamSink = "Bench/StreamSink"
	// StreamSource reads an 8-byte big-endian size, then writes that many
	// bytes (a repeating pattern) and ends.
	StreamSource = "Bench/StreamSource"
)

// RegisterStreams registers StreamSink and StreamSource on reg.
func RegisterStreams(reg *handler.Registry) {
	reg.HandleStream(StreamSink, func(_ context.Context, s handler.Stream) error {
		n, err := io.CopyBuffer(io.Discard, s, make([]byte, 64<<10))
		if err != nil {
			return err
		}
		_, err = s.Write(binary.BigEndian.AppendUint64(nil, uint64(n)))
		return err
	})
	reg.HandleStream(StreamSource, func(_ context.Context, s handler.Stream) error {
		var size [8]byte
		if _, err := io.ReadFull(s, size[:]); err != nil {
			return &handler.Error{Code: proto.CodeInvalidArgument, Message: "want an 8-byte size first", Unprocessed: true}
		}
		return WritePattern(s, int64(binary.BigEndian.Uint64(size[:])))
	})
}

// WritePattern writes n bytes of a repeating pattern to w, in 64 KiB
// pieces, with no allocation per piece.
func WritePattern(w io.Writer, n int64) error {
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = byte(i*7 + i>>8)
	}
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := w.Write(buf[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}
