package handler

import (
	"reflect"
	"sync/atomic"

	"github.com/rpcd/rpcd/internal/jsoncodec"
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

// jsonCodec is JSON; its machinery is internal/jsoncodec's.
type jsonCodec struct{}

func (jsonCodec) ID() proto.Codec { return proto.CodecJSON }

func (jsonCodec) Append(dst []byte, v any) ([]byte, error) { return jsoncodec.Append(dst, v) }

func (jsonCodec) Unmarshal(data []byte, v any) error { return jsoncodec.Unmarshal(data, v) }

// userCodecs are the codecs RegisterCodec added, by id less CodecUser.
var userCodecs [256 - int(proto.CodecUser)]atomic.Pointer[codecBox]

type codecBox struct{ c Codec }

// RegisterCodec adds c, an application's codec, to JSON as an encoding
// typed routes (Func) take: a call whose frame carries c.ID() has its
// argument decoded and its result encoded with c. Its id must be one of
// the applications', proto.CodecUser (0x80) to 0xFF (docs/protocol.md,
// "Codecs"), agreed with the peers that use it; a client sends its typed
// calls in it with client.Options.Codec, and needs no registration. Register
// codecs before serving: RegisterCodec panics on an id outside that range
// or one another codec has taken; registering an equal codec again does
// nothing.
func RegisterCodec(c Codec) {
	id := c.ID()
	if id < proto.CodecUser {
		panic("handler: RegisterCodec: id " + id.String() + " is not an application's (0x80 to 0xff)")
	}
	slot := &userCodecs[id-proto.CodecUser]
	if slot.CompareAndSwap(nil, &codecBox{c}) {
		return
	}
	if old := slot.Load().c; reflect.TypeOf(old) == reflect.TypeOf(c) && reflect.TypeOf(c).Comparable() && old == c {
		return
	}
	panic("handler: RegisterCodec: id " + id.String() + " is taken by another codec")
}

// codecFor returns the codec for id, JSON or registered; nil if none.
func codecFor(id proto.Codec) Codec {
	if id == proto.CodecJSON {
		return JSON
	}
	if id >= proto.CodecUser {
		if b := userCodecs[id-proto.CodecUser].Load(); b != nil {
			return b.c
		}
	}
	return nil
}
