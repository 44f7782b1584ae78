package jsoncodec

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// The JSON codec's own paths for the types most calls carry: strings,
// booleans, integers and floats, which sonic would box (an allocation per
// call) to reach its encoder. Anything else, and any string these paths do
// not handle plainly (escapes on decoding), goes to sonic.

// appendScalar appends v's JSON if v points to a scalar it knows; a nil
// pointer is left to sonic, which writes null.
func appendScalar(dst []byte, v any) ([]byte, bool) {
	switch p := v.(type) {
	case *string:
		if p != nil {
			return appendString(dst, *p), true
		}
	case *bool:
		if p != nil {
			return strconv.AppendBool(dst, *p), true
		}
	case *int:
		if p != nil {
			return strconv.AppendInt(dst, int64(*p), 10), true
		}
	case *int8:
		if p != nil {
			return strconv.AppendInt(dst, int64(*p), 10), true
		}
	case *int16:
		if p != nil {
			return strconv.AppendInt(dst, int64(*p), 10), true
		}
	case *int32:
		if p != nil {
			return strconv.AppendInt(dst, int64(*p), 10), true
		}
	case *int64:
		if p != nil {
			return strconv.AppendInt(dst, *p, 10), true
		}
	case *uint:
		if p != nil {
			return strconv.AppendUint(dst, uint64(*p), 10), true
		}
	case *uint8:
		if p != nil {
			return strconv.AppendUint(dst, uint64(*p), 10), true
		}
	case *uint16:
		if p != nil {
			return strconv.AppendUint(dst, uint64(*p), 10), true
		}
	case *uint32:
		if p != nil {
			return strconv.AppendUint(dst, uint64(*p), 10), true
		}
	case *uint64:
		if p != nil {
			return strconv.AppendUint(dst, *p, 10), true
		}
	case *float64:
		if p != nil {
			return appendFloat(dst, *p, 64)
		}
	case *float32:
		if p != nil {
			return appendFloat(dst, float64(*p), 32)
		}
	}
	return dst, false // a nil pointer (null), or a type of sonic's
}

// appendFloat formats f as encoding/json does; NaN and infinities are left
// to sonic, which reports them as errors.
func appendFloat(dst []byte, f float64, bits int) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, false
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21)) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, bits)
	if format == 'e' { // clean up e-09 to e-9, as encoding/json does
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, true
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string: quotes, backslash and control
// characters escaped, invalid UTF-8 replaced by U+FFFD (as encoding/json
// and sonic's ValidateString do), other bytes as they are.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\ufffd`...)
				start = i + 1
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// unmarshalScalar decodes data into v if v is a *string and data a plain
// JSON string (no escapes, valid UTF-8): ok reports whether it did.
func unmarshalScalar(data []byte, v any) (ok bool, err error) {
	p, isString := v.(*string)
	if !isString || p == nil {
		return false, nil
	}
	data = trimSpace(data)
	if len(data) < 2 || data[0] != '"' || data[len(data)-1] != '"' {
		return false, nil
	}
	body := data[1 : len(data)-1]
	for _, c := range body {
		if c < 0x20 || c == '"' || c == '\\' {
			return false, nil
		}
	}
	if !utf8.Valid(body) {
		return false, nil
	}
	*p = string(body) // the one copy the caller needs
	return true, nil
}

// trimSpace trims JSON whitespace.
func trimSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}
