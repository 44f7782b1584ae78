package handler

import (
	"errors"
	"sync"
	"unsafe"

	"github.com/bytedance/sonic/decoder"
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

// JSON is the JSON codec, backed by sonic, with its own paths for strings,
// booleans and numbers. Decoded strings are copies, never views into the
// request bytes.
var JSON Codec = jsonCodec{}

type jsonCodec struct{}

func (jsonCodec) ID() proto.Codec { return proto.CodecJSON }

func (jsonCodec) Append(dst []byte, v any) ([]byte, error) {
	if out, ok := appendScalar(dst, v); ok {
		return out, nil
	}
	return encodeSonic(dst, v)
}

// encodeSonic is apart from Append because the slice header it hands sonic
// escapes to the heap: the scalar paths must not pay for that allocation.
func encodeSonic(dst []byte, v any) ([]byte, error) {
	err := encoder.EncodeInto(&dst, v, encoder.ValidateString)
	return dst, err
}

// decoders reuses sonic's decoders, which are made per call otherwise.
var decoders = sync.Pool{New: func() any { return decoder.NewDecoder("") }}

func (jsonCodec) Unmarshal(data []byte, v any) error {
	if ok, err := unmarshalScalar(data, v); ok {
		return err
	}
	// A view of data, not a copy: CopyString makes every decoded string a
	// copy, and the decoder drops the view before going back to the pool.
	// ValidateString refuses control characters and bad escapes in any
	// string, skipped or kept (sonic lets them through otherwise), and
	// replaces invalid UTF-8 with U+FFFD, as encoding/json does.
	d := decoders.Get().(*decoder.Decoder)
	d.Reset(unsafe.String(unsafe.SliceData(data), len(data)))
	d.SetOptions(decoder.OptionCopyString | decoder.OptionValidateString)
	err := d.Decode(v)
	if err == nil {
		err = d.CheckTrailings()
	}
	d.Reset("")
	decoders.Put(d)
	if err != nil {
		// sonic's errors quote the input; this one owns its text.
		return errors.New(errorText(err))
	}
	return nil
}

// errorText returns err's message. sonic v1.15.5 panics formatting some of
// its syntax errors (an index out of range when the error's position runs
// past the input; FuzzTypedArgs found it): the message then says less.
func errorText(err error) (msg string) {
	defer func() {
		if recover() != nil {
			msg = "invalid JSON"
		}
	}()
	return err.Error()
}

// codecFor returns the codec registered for id, or nil.
func codecFor(id proto.Codec) Codec {
	if id == proto.CodecJSON {
		return JSON
	}
	return nil
}
