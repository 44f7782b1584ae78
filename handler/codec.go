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

// AppendArg appends in, a call's argument, to dst encoded as JSON; a nil
// in is no payload. A value JSON cannot encode is an InvalidArgument error
// marked Unprocessed: the call was never sent. Callers on either side of a
// connection (client.Client, a server's Peer) encode arguments with it.
func AppendArg(dst []byte, in any) ([]byte, error) {
	if in == nil {
		return dst, nil
	}
	out, err := JSON.Append(dst, in)
	if err != nil {
		return dst, &Error{Code: proto.CodeInvalidArgument, Message: "encoding the argument: " + err.Error(), Unprocessed: true}
	}
	return out, nil
}

// DecodeReply decodes the JSON reply of a call to route into out, a
// pointer; a nil out or an empty reply decodes nothing.
func DecodeReply(route string, reply []byte, out any) error {
	if out == nil || len(reply) == 0 {
		return nil
	}
	if err := JSON.Unmarshal(reply, out); err != nil {
		return &Error{Code: proto.CodeInvalidArgument, Message: "decoding the reply of " + route + ": " + err.Error()}
	}
	return nil
}
