package proto

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// Metadata is an encoded metadata section: a sequence of entries, each a
// 1-byte key length, the key, a 2-byte big-endian value length and the value.
// The zero Metadata is empty. Methods read it in place and allocate nothing.
type Metadata []byte

// AppendMetadata appends one entry to md. The key must be 1 to 255 bytes of
// printable ASCII and the value at most 65,535 bytes; AppendMetadata panics
// otherwise, as the caller controls both.
func AppendMetadata(md Metadata, key string, value []byte) Metadata {
	if err := CheckMetadataKey(key); err != nil {
		panic(err)
	}
	if len(value) > 0xffff {
		panic("rpcd: metadata value longer than 65535 bytes")
	}
	md = append(md, byte(len(key)))
	md = append(md, key...)
	md = binary.BigEndian.AppendUint16(md, uint16(len(value)))
	return append(md, value...)
}

// Get returns the value of the first entry whose key is key.
func (md Metadata) Get(key string) ([]byte, bool) {
	for {
		k, v, rest, ok := md.next()
		if !ok {
			return nil, false
		}
		if string(k) == key {
			return v, true
		}
		md = rest
	}
}

// Range calls fn for each entry in order until fn returns false. It stops at
// the first malformed entry; Validate reports it.
func (md Metadata) Range(fn func(key, value []byte) bool) {
	for {
		k, v, rest, ok := md.next()
		if !ok || !fn(k, v) {
			return
		}
		md = rest
	}
}

// Len returns the number of entries.
func (md Metadata) Len() int {
	n := 0
	for {
		_, _, rest, ok := md.next()
		if !ok {
			return n
		}
		n++
		md = rest
	}
}

// next splits off the first entry; ok is false at the end or at a malformed
// entry.
func (md Metadata) next() (key, value []byte, rest Metadata, ok bool) {
	if len(md) == 0 {
		return nil, nil, nil, false
	}
	kl := int(md[0])
	if kl == 0 || len(md) < 1+kl+2 {
		return nil, nil, nil, false
	}
	vl := int(binary.BigEndian.Uint16(md[1+kl:]))
	end := 1 + kl + 2 + vl
	if len(md) < end {
		return nil, nil, nil, false
	}
	return md[1 : 1+kl], md[1+kl+2 : end : end], md[end:], true
}

// Validate checks that the entries fill md exactly and that every key is 1 to
// 255 bytes of printable ASCII.
func (md Metadata) Validate() error {
	for off := 0; off < len(md); {
		kl := int(md[off])
		if kl == 0 {
			return errProtocol("metadata entry at offset %d has an empty key", off)
		}
		if len(md)-off < 1+kl+2 {
			return errProtocol("metadata entry at offset %d runs past the section", off)
		}
		for _, c := range md[off+1 : off+1+kl] {
			if c < 0x21 || c > 0x7e {
				return errProtocol("metadata key byte 0x%02x at offset %d is not printable ASCII", c, off)
			}
		}
		vl := int(binary.BigEndian.Uint16(md[off+1+kl:]))
		end := off + 1 + kl + 2 + vl
		if end > len(md) {
			return errProtocol("metadata value at offset %d runs past the section", off)
		}
		off = end
	}
	return nil
}

// ParsePair parses "key=value", the text form of one metadata pair (rpcd
// call's -meta), refusing what AppendMetadata would panic on: a key outside
// CheckMetadataKey's rules, a value past 65,535 bytes.
func ParsePair(kv string) (key, value string, err error) {
	key, value, ok := strings.Cut(kv, "=")
	switch {
	case !ok:
		return "", "", fmt.Errorf("%q is not key=value", kv)
	case len(value) > 0xffff:
		return "", "", fmt.Errorf("value of %q has %d bytes, want at most 65535", key, len(value))
	}
	if err := CheckMetadataKey(key); err != nil {
		return "", "", fmt.Errorf("key %q: %v", key, strings.TrimPrefix(err.Error(), "rpcd: "))
	}
	return key, value, nil
}

// CheckMetadataKey reports why key cannot be a metadata key, or nil if it
// can: 1 to 255 bytes of printable ASCII.
func CheckMetadataKey(key string) error {
	if len(key) == 0 || len(key) > 255 {
		return fmt.Errorf("rpcd: metadata key of %d bytes, want 1 to 255", len(key))
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("rpcd: metadata key byte 0x%02x is not printable ASCII", c)
		}
	}
	return nil
}
