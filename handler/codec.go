package handler

import (
	"github.com/bytedance/sonic"
	"github.com/bytedance/sonic/encoder"

	"github.com/rpcd/rpcd/proto"
)

// Codec turns Go values into payload bytes and back.
type Codec interface {
	// ID is the codec's number on the wire.
	ID() proto.Codec
	// Append appends the encoding of v to dst.
	Append(dst []byte, v any) ([]byte, error)
	// Unmarshal decodes data into v, a pointer. The result must not refer to
	// data, which the transport reuses.
	Unmarshal(data []byte, v any) error
}

// JSON is the JSON codec, backed by sonic. Decoded strings are copies, never
// views into the request bytes.
var JSON Codec = jsonCodec{}

// jsonAPI decodes with CopyString: an inline handler's request bytes are the
// connection's input buffer, reused as soon as the handler returns.
var jsonAPI = sonic.Config{CopyString: true}.Froze()

type jsonCodec struct{}

func (jsonCodec) ID() proto.Codec { return proto.CodecJSON }

func (jsonCodec) Append(dst []byte, v any) ([]byte, error) {
	err := encoder.EncodeInto(&dst, v, 0)
	return dst, err
}

func (jsonCodec) Unmarshal(data []byte, v any) error { return jsonAPI.Unmarshal(data, v) }

// codecFor returns the codec registered for id, or nil.
func codecFor(id proto.Codec) Codec {
	if id == proto.CodecJSON {
		return JSON
	}
	return nil
}
