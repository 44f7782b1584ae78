package jsoncodec

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
)

// The JSON codec's errors say what is wrong with a payload, and where, in
// rpcd's words: the field as the JSON names it, what the Go type wants,
// what came, and the byte it begins at, counted from 1:
//
//	field "a": want a number, got a string at byte 6
//	field "items[1].x": -1 is out of range for uint8 at byte 24
//	not valid JSON: unexpected '}' at byte 8, where a key belongs
//	not valid JSON: it ends at byte 7, before the value is complete
//
// Never sonic's message, which quotes the input around the error. Only a
// failed decode pays for this: the payload is read again with
// encoding/json, whose errors carry the offset and the Go type, and
// scanned once more to name the field.

// describeLimit is the largest payload whose error is described in full.
// The description reads the payload again, twice with encoding/json (slower
// than sonic) and once to name the field; past this, on an event loop, it
// would cost more than the call it refuses, and the message gives what
// sonic's error gives: the position, the field there and, for a value of
// the wrong type, what was wanted.
const describeLimit = 64 << 10

// describeJSON returns the message for data that did not decode into v
// (a pointer), sonicErr being the decoder's error.
func describeJSON(data []byte, sonicErr error, v any) string {
	if len(bytes.TrimLeft(data, " \t\r\n")) == 0 {
		return "not valid JSON: no value"
	}
	if len(data) > describeLimit {
		return describeCoarse(data, sonicErr, false)
	}
	var raw json.RawMessage
	var se *json.SyntaxError
	if err := json.Unmarshal(data, &raw); errors.As(err, &se) {
		return describeSyntax(data, se)
	}
	var ue *json.UnsupportedValueError
	if errors.As(sonicErr, &ue) {
		return "nested too deeply" // sonic's limit, 4096 levels, is below encoding/json's
	}
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return describeCoarse(data, sonicErr, true)
	}
	err := json.Unmarshal(data, reflect.New(t.Elem()).Interface())
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		// encoding/json takes what sonic refused (a ,string integer that
		// is not a JSON number): sonic's position is all there is.
		return describeCoarse(data, sonicErr, true)
	case errors.As(err, &te):
		return describeType(data, te)
	case strings.HasPrefix(err.Error(), "json: "):
		// encoding/json's own complaint (a ,string field that holds no
		// number): its words name the library, so say less.
		return describeCoarse(data, sonicErr, true)
	}
	// The error of a type's own UnmarshalJSON or UnmarshalText (a time, a
	// base64 []byte): its words are the type's.
	return strings.TrimPrefix(errorText(err), "rpcd: ")
}

// describeSyntax words a syntax error of encoding/json's, whose Offset is
// the number of bytes read when it was found.
func describeSyntax(data []byte, se *json.SyntaxError) string {
	at := int(se.Offset)
	if at >= len(data) && strings.HasPrefix(se.Error(), "unexpected end") {
		return "not valid JSON: it ends at byte " + strconv.Itoa(len(data)) + ", before the value is complete"
	}
	if at < 1 || at > len(data) {
		return "not valid JSON"
	}
	msg := "not valid JSON: unexpected " + quoteByte(data[at-1]) + " at byte " + strconv.Itoa(at)
	for _, w := range syntaxWhere {
		if strings.Contains(se.Error(), w.theirs) {
			return msg + ", " + w.ours
		}
	}
	return msg
}

// syntaxWhere words the contexts encoding/json names, most specific
// first.
var syntaxWhere = []struct{ theirs, ours string }{
	{"after top-level value", "after the value"},
	{"looking for beginning of object key string", "where a key belongs"},
	{"after object key:value pair", "where ',' or '}' belongs"},
	{"after object key", "where ':' belongs"},
	{"after array element", "where ',' or ']' belongs"},
	{"looking for beginning of value", "where a value belongs"},
	{"in string escape code", "in a string's escape"},
	{"hexadecimal character escape", "in a string's \\u escape"},
	{"in string literal", "in a string"},
	{"numeric literal", "in a number"},
	{"in literal true", "in true"},
	{"in literal false", "in false"},
	{"in literal null", "in null"},
}

// quoteByte shows a byte of the input: 'x' if it is printable ASCII.
func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return "'" + string(c) + "'"
	}
	return "byte 0x" + strconv.FormatUint(uint64(c)|0x100, 16)[1:]
}

// describeType words a value of the wrong type. te.Offset is the number of
// bytes read when it was found: just past a scalar, just past the opening
// bracket of an object or array.
func describeType(data []byte, te *json.UnmarshalTypeError) string {
	loc := locate(data, int(te.Offset)-1)
	want := wantText(te.Type)
	var msg string
	switch {
	case loc.key:
		msg = "key " + clip(loc.keyText) + " is not " + want
	case loc.start < len(data) && isNumberStart(data[loc.start]) && isNumberKind(te.Type):
		num := clip(numberAt(data, loc.start))
		if isIntKind(te.Type) && strings.ContainsAny(num, ".eE") {
			msg = "want an integer, got " + num
		} else {
			msg = num + " is out of range for " + te.Type.String()
		}
	default:
		msg = "want " + want + ", got " + gotText(data, loc.start)
	}
	msg += " at byte " + strconv.Itoa(loc.start+1)
	return fieldText(loc.path) + msg
}

// describeCoarse words sonic's error without its text: the position it
// gives, and the field there. valid says data is known to be JSON.
func describeCoarse(data []byte, sonicErr error, valid bool) string {
	pos, typ, syntax, ok := sonicPos(sonicErr)
	switch {
	case !ok || pos < 0:
		return "the value does not decode into the argument's type"
	case pos >= len(data) && !valid:
		return "not valid JSON: it ends at byte " + strconv.Itoa(len(data)) + ", before the value is complete"
	case pos >= len(data):
		return "the value does not decode into the argument's type"
	case syntax && !valid:
		return "not valid JSON at byte " + strconv.Itoa(pos+1)
	}
	loc := locate(data, pos)
	at := " at byte " + strconv.Itoa(loc.start+1)
	if typ != nil && !loc.key { // a value of the wrong type
		return fieldText(loc.path) + "want " + wantText(typ) + ", got " + gotText(data, loc.start) + at
	}
	return fieldText(loc.path) + "does not decode" + at
}

// sonicPos returns the position sonic's error names; for a value of the
// wrong type, the Go type it wanted; whether it is a syntax error (one
// with an error code). They are read by their field names, so that the
// code builds wherever sonic's decoder is encoding/json.
func sonicPos(err error) (pos int, typ reflect.Type, syntax, ok bool) {
	for err != nil {
		rv := reflect.ValueOf(err)
		for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
			if rv.IsNil() {
				return 0, nil, false, false
			}
			rv = rv.Elem()
		}
		if rv.Kind() == reflect.Struct {
			if f := rv.FieldByName("Pos"); f.IsValid() && f.CanInt() {
				if t := rv.FieldByName("Type"); t.IsValid() && t.CanInterface() {
					typ, _ = t.Interface().(reflect.Type)
				}
				syntax = typ == nil && rv.FieldByName("Code").IsValid()
				return int(f.Int()), typ, syntax, true
			}
		}
		err = errors.Unwrap(err)
	}
	return 0, nil, false, false
}

// fieldText names a location for a message: `field "a.b[2]": `, or
// `element [2]: ` in a top-level array; nothing at the top.
func fieldText(path string) string {
	switch {
	case path == "":
		return ""
	case path[0] == '[':
		return "element " + path + ": "
	}
	return "field " + strconv.Quote(path) + ": "
}

// wantText says what a Go type takes in JSON.
func wantText(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a string (base64)"
		}
		return "an array"
	case reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a " + t.String()
}

func isNumberKind(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return isIntKind(t) || t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64
}

func isIntKind(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	}
	return false
}

// gotText says what kind of JSON value begins at data[i].
func gotText(data []byte, i int) string {
	if i < 0 || i >= len(data) {
		return "nothing"
	}
	switch c := data[i]; {
	case c == '"':
		return "a string"
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case isNumberStart(c):
		return "a number"
	}
	return "something else"
}

func isNumberStart(c byte) bool { return c == '-' || c >= '0' && c <= '9' }

// numberAt returns the number that begins at data[i].
func numberAt(data []byte, i int) string {
	j := i
	for j < len(data) && strings.IndexByte("+-0123456789.eE", data[j]) >= 0 {
		j++
	}
	return string(data[i:j])
}

// clip shortens what a message quotes from the input.
func clip(s string) string {
	const most = 40
	if len(s) <= most {
		return s
	}
	return s[:most] + "…"
}

// location is where in a payload a value is: its path of keys and
// indexes, and the offset it begins at; key is set when the offset fell
// in an object's key rather than a value.
type location struct {
	path    string
	start   int
	key     bool
	keyText string // the key, quoted as the input has it, when key is set
}

// locate finds the value of data (valid JSON) that covers offset at, or
// the first that begins after it.
func locate(data []byte, at int) location {
	type level struct {
		object bool
		key    string
		index  int
		inKey  bool // an object waiting for its next key
	}
	var stack []level
	path := func() string {
		var b strings.Builder
		for i, l := range stack {
			if l.object && l.inKey {
				break // an object before its first key, or between keys
			}
			switch {
			case !l.object:
				b.WriteString("[" + strconv.Itoa(l.index) + "]")
			case i > 0:
				b.WriteString("." + clip(l.key))
			default:
				b.WriteString(clip(l.key))
			}
		}
		return b.String()
	}
	for i := 0; i < len(data); {
		switch c := data[i]; c {
		case ' ', '\t', '\r', '\n', ':':
			i++
		case '{', '[':
			if i >= at {
				return location{path: path(), start: i}
			}
			stack = append(stack, level{object: c == '{', inKey: c == '{'})
			i++
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			i++
		case ',':
			if n := len(stack); n > 0 {
				if stack[n-1].object {
					stack[n-1].inKey = true
				} else {
					stack[n-1].index++
				}
			}
			i++
		case '"':
			end := stringEnd(data, i)
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].inKey {
				if at < end { // the key itself: the object is the place
					return location{path: path(), start: i, key: true, keyText: string(data[i:end])}
				}
				stack[n-1].key = keyText(data[i:end])
				stack[n-1].inKey = false
				i = end
				continue
			}
			if at < end {
				return location{path: path(), start: i}
			}
			i = end
		default: // a number, true, false or null
			end := i
			for end < len(data) && strings.IndexByte(" \t\r\n,:]}", data[end]) < 0 {
				end++
			}
			if at < end {
				return location{path: path(), start: i}
			}
			i = end
		}
	}
	return location{path: path(), start: max(at, 0)}
}

// stringEnd returns the offset just past the string that begins at
// data[i], a quote.
func stringEnd(data []byte, i int) int {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(data)
}

// keyText returns a key as a string, its escapes undone.
func keyText(quoted []byte) string {
	var s string
	if json.Unmarshal(quoted, &s) != nil {
		return strings.Trim(string(quoted), `"`)
	}
	return s
}
