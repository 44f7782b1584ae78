package jsoncodec

import (
	"errors"
	"reflect"
	"sync"
	"unsafe"

	"github.com/bytedance/sonic"
	"github.com/bytedance/sonic/decoder"
	"github.com/bytedance/sonic/encoder"
)

// Append appends the JSON encoding of v to dst: a scalar by the codec's
// own paths, anything else by sonic, which validates strings (invalid
// UTF-8 becomes U+FFFD).
func Append(dst []byte, v any) ([]byte, error) {
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

// Unmarshal decodes data, one JSON value, into v, a pointer. Decoded
// strings are copies, never views into data. An error says what is wrong
// and where, in rpcd's words (message.go), never quoting the input around
// it.
func Unmarshal(data []byte, v any) error {
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
		// sonic's errors quote the input around the error: this one says
		// what is wrong and where, in rpcd's words (message.go).
		return errors.New(describeJSON(data, err, v))
	}
	return nil
}

// Prepare compiles sonic's codecs for t now, not on the first call that
// encodes or decodes one.
func Prepare(t reflect.Type) { _ = sonic.Pretouch(t) }

// errorText returns err's message. sonic v1.15.5 panics formatting some of
// its syntax errors (an index out of range on a negative error code;
// FuzzTypedArgs found it): the message then says less.
func errorText(err error) (msg string) {
	defer func() {
		if recover() != nil {
			msg = "invalid JSON"
		}
	}()
	return err.Error()
}
