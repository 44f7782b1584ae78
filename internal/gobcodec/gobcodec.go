// Package gobcodec is an application's codec for rpcd's tests: one
// encoding/gob value per payload, under the id it is given (handler.Codec;
// register it with handler.RegisterCodec where typed routes take it).
package gobcodec

import (
	"bytes"
	"encoding/gob"

	"github.com/rpcd/rpcd/proto"
)

// Codec is the gob codec with the id it holds.
type Codec proto.Codec

// ID returns the codec's id.
func (c Codec) ID() proto.Codec { return proto.Codec(c) }

// Append appends v encoded by gob to dst.
func (Codec) Append(dst []byte, v any) ([]byte, error) {
	b := bytes.NewBuffer(dst)
	err := gob.NewEncoder(b).Encode(v)
	return b.Bytes(), err
}

// Unmarshal decodes data, one gob value, into v.
func (Codec) Unmarshal(data []byte, v any) error {
	return gob.NewDecoder(bytes.NewReader(data)).Decode(v)
}
