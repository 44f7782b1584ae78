package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// fuzzArgs is the argument of the typed route FuzzTypedArgs serves: a field
// of each kind a typed route's argument is made of, nested.
type fuzzArgs struct {
	S      string               `json:"s"`
	I      int                  `json:"i"`
	I8     int8                 `json:"i8"`
	I16    int16                `json:"i16"`
	I32    int32                `json:"i32"`
	I64    int64                `json:"i64"`
	U      uint                 `json:"u"`
	U8     uint8                `json:"u8"`
	U16    uint16               `json:"u16"`
	U32    uint32               `json:"u32"`
	U64    uint64               `json:"u64"`
	F32    float32              `json:"f32"`
	F64    float64              `json:"f64"`
	B      bool                 `json:"b"`
	Ints   []int64              `json:"ints"`
	Strs   []string             `json:"strs"`
	Bytes  []byte               `json:"bytes"`
	Arr    [2]int16             `json:"arr"`
	M      map[string]int32     `json:"m"`
	MI     map[int]string       `json:"mi"`
	MN     map[string]*fuzzNode `json:"mn"`
	P      *int64               `json:"p"`
	PS     *string              `json:"ps"`
	PP     **bool               `json:"pp"`
	Node   fuzzNode             `json:"node"`
	Next   *fuzzNode            `json:"next"`
	Raw    json.RawMessage      `json:"raw"`
	Any    any                  `json:"any"`
	Quoted int64                `json:"quoted,string"`
	Omit   string               `json:"omit,omitempty"`
	Skip   string               `json:"-"`
	fuzzEmbedded
}

type fuzzNode struct {
	Name string     `json:"name"`
	Val  float64    `json:"val"`
	Kids []fuzzNode `json:"kids"`
	Next *fuzzNode  `json:"next"`
}

type fuzzEmbedded struct {
	Tag   string `json:"tag"`
	Count uint16 `json:"count"`
}

const fuzzRoute = "Fuzz/Typed"

// FuzzTypedArgs serves fuzzed payloads to a typed route, as the reactor
// does, and checks what comes back: never a panic; either a reply that is
// JSON (and that encoding/json reads back) or an InvalidArgument error
// marked Unprocessed, in rpcd's words (checkArgumentMessage); every payload that encoding/json decodes into the
// argument, rpcd decodes too, and to the same value. The differences that
// sonic, rpcd's decoder, has by design are listed in sonicMayRefuse and
// sonicMayDiffer; the crashers and the known bug it skips are in
// testdata/fuzz/README.md.
func FuzzTypedArgs(f *testing.F) {
	for _, s := range typedSeeds() {
		f.Add([]byte(s))
	}
	reg := handler.NewRegistry()
	reg.Handle(fuzzRoute, handler.Func(func(ctx context.Context, in fuzzArgs) (fuzzArgs, error) {
		*ctx.Value(seenKey{}).(*fuzzArgs) = in
		return in, nil
	}))
	rt := reg.Lookup([]byte(fuzzRoute))
	f.Fuzz(func(t *testing.T, in []byte) {
		var seen fuzzArgs
		call := &handler.Call{Codec: proto.CodecJSON, Route: fuzzRoute}
		call.Start(context.WithValue(context.Background(), seenKey{}, &seen), time.Time{})
		reply, err := rt.Serve(call, in, nil)
		call.End()

		var p *handler.PanicError
		if errors.As(err, &p) {
			t.Fatalf("payload %s: handler panicked: %v\n%s", show(in), p.Value, p.Stack)
		}
		var std fuzzArgs
		stdErr := json.Unmarshal(in, &std)
		if err != nil {
			var e *handler.Error
			if errors.As(err, &e) && e.Code == proto.CodeInternal && strings.HasPrefix(e.Message, "encoding reply") && maxNesting(in) > sonicMaxDepth {
				// sonic decodes a chain of struct pointers deeper than it
				// encodes: the handler's reply (the argument, echoed) is
				// too deep to send, which is the server's Internal error.
				return
			}
			if !errors.As(err, &e) || e.Code != proto.CodeInvalidArgument || !e.Unprocessed {
				t.Fatalf("payload %s: error %#v, want InvalidArgument marked Unprocessed", show(in), err)
			}
			if msg := checkArgumentMessage(fuzzRoute, in, e.Message); msg != "" {
				t.Fatalf("payload %s: %s", show(in), msg)
			}
			if stdErr == nil && !sonicMayRefuse(in) {
				t.Fatalf("payload %s: encoding/json accepts it, rpcd refuses it: %v", show(in), err)
			}
			return
		}
		if !json.Valid(reply) {
			t.Fatalf("payload %s: reply %s is not JSON", show(in), show(reply))
		}
		var back fuzzArgs
		if err := json.Unmarshal(reply, &back); err != nil {
			t.Fatalf("payload %s: reply %s does not decode with encoding/json: %v", show(in), show(reply), err)
		}
		if stdErr == nil && !sonicMayDiffer(in) {
			if d := firstDiff(reflect.ValueOf(normalize(seen)), reflect.ValueOf(normalize(std)), "in"); d != "" {
				t.Fatalf("payload %s: rpcd and encoding/json decode different values: %s", show(in), d)
			}
		}
	})
}

type seenKey struct{}

// show quotes a payload for a failure message, cut short if long.
func show(b []byte) string {
	if len(b) > 300 {
		return fmt.Sprintf("%q... (%d bytes)", b[:300], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// maxNesting is the deepest nesting of arrays and objects in a JSON text.
func maxNesting(b []byte) int {
	depth, most, inString := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			depth++
			most = max(most, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return most
}

// sonicMaxDepth is the deepest nesting sonic decodes (its MAX_RECURSE);
// encoding/json takes up to 10000.
const sonicMaxDepth = 4096

// sonicMayRefuse reports whether in belongs to a class of payloads that
// encoding/json accepts and sonic, rpcd's JSON decoder, refuses by design:
//   - arrays and objects nested deeper than sonicMaxDepth ("recursion
//     exceeded max depth"; through a chain of struct pointers, "json:
//     unsupported value: ");
//   - a `,string` field (Quoted) whose quoted text is not a JSON number,
//     such as "00" or "-01": encoding/json parses the text with strconv,
//     which takes leading zeros; sonic parses it as JSON, which does not;
//   - a map with integer keys (MI) with a key that is not a JSON number,
//     such as "00" or "+1", for the same reason.
func sonicMayRefuse(in []byte) bool {
	if maxNesting(in) > sonicMaxDepth {
		return true
	}
	var probe struct {
		Quoted *string                     `json:"quoted"`
		MI     map[string]*json.RawMessage `json:"mi"`
	}
	if json.Unmarshal(in, &probe) != nil {
		return false
	}
	isNumber := func(q string) bool {
		return q != "" && (q[0] == '-' || '0' <= q[0] && q[0] <= '9') && json.Valid([]byte(q))
	}
	if q := probe.Quoted; q != nil && !isNumber(*q) && *q != "null" {
		return true
	}
	for k := range probe.MI {
		if !isNumber(k) {
			return true
		}
	}
	return false
}

// sonicMayDiffer reports whether in belongs to a class of payloads that
// both decoders accept into different values by design:
//   - payloads that are not UTF-8: both turn each invalid byte in a string
//     into U+FFFD (rpcd runs sonic with OptionValidateString), but in a
//     json.RawMessage encoding/json keeps the bytes and sonic replaces
//     them too. docs/protocol.md asks for UTF-8, so such a payload is the
//     caller's error either way; TestJSONInvalidUTF8 checks the strings.
func sonicMayDiffer(in []byte) bool {
	return !utf8.Valid(in)
}

// firstDiff names the first place where a and b differ, with both values,
// or returns "" if they are deeply equal.
func firstDiff(a, b reflect.Value, path string) string {
	if !a.IsValid() || !b.IsValid() {
		if a.IsValid() != b.IsValid() {
			return fmt.Sprintf("%s: rpcd %v, encoding/json %v", path, a, b)
		}
		return ""
	}
	if a.Type() != b.Type() {
		return fmt.Sprintf("%s: rpcd %T %#v, encoding/json %T %#v", path, a.Interface(), a.Interface(), b.Interface(), b.Interface())
	}
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			if d := firstDiff(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); d != "" {
				return d
			}
		}
		return ""
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return fmt.Sprintf("%s: rpcd %#v, encoding/json %#v", path, a.Interface(), b.Interface())
			}
			return ""
		}
		return firstDiff(a.Elem(), b.Elem(), path)
	case reflect.Slice, reflect.Array:
		if a.Kind() == reflect.Slice && a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return fmt.Sprintf("%s: rpcd %#v, encoding/json %#v", path, a.Interface(), b.Interface())
		}
		for i := range a.Len() {
			if d := firstDiff(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
		return ""
	case reflect.Map:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return fmt.Sprintf("%s: rpcd %#v, encoding/json %#v", path, a.Interface(), b.Interface())
		}
		for _, k := range a.MapKeys() {
			bv := b.MapIndex(k)
			if !bv.IsValid() {
				return fmt.Sprintf("%s: rpcd has key %#v, encoding/json has not", path, k.Interface())
			}
			if d := firstDiff(a.MapIndex(k), bv, fmt.Sprintf("%s[%#v]", path, k.Interface())); d != "" {
				return d
			}
		}
		return ""
	}
	if !reflect.DeepEqual(a.Interface(), b.Interface()) {
		return fmt.Sprintf("%s: rpcd %#v, encoding/json %#v", path, a.Interface(), b.Interface())
	}
	return ""
}

// normalize returns v with what may differ without meaning cleared: nil
// and empty RawMessage are both "absent", and a RawMessage is compared
// compacted.
func normalize(v fuzzArgs) fuzzArgs {
	if len(v.Raw) > 0 {
		var b bytes.Buffer
		if json.Compact(&b, v.Raw) == nil {
			v.Raw = b.Bytes()
		}
	}
	return v
}

// typedSeeds are payloads of each shape: valid objects, truncated ones,
// deep nesting, huge numbers, escapes and bytes that are not UTF-8.
func typedSeeds() []string {
	full := `{"s":"str","i":-1,"i8":-128,"i16":32767,"i32":-2147483648,"i64":9223372036854775807,` +
		`"u":1,"u8":255,"u16":65535,"u32":4294967295,"u64":18446744073709551615,` +
		`"f32":3.4028235e38,"f64":-1.5e-300,"b":true,"ints":[1,-2,3],"strs":["a","","c"],` +
		`"bytes":"aGVsbG8=","arr":[1,2],"m":{"a":1},"mi":{"1":"one","-2":"minus two"},` +
		`"mn":{"x":{"name":"n","val":1,"kids":[{"name":"k"}]},"y":null},` +
		`"p":7,"ps":"ptr","pp":true,"node":{"name":"root","kids":[{"next":{"name":"deep"}}]},` +
		`"next":{"val":0.5},"raw":{"any":["json",1,null]},"any":{"a":[1,"b",{"c":null}]},` +
		`"quoted":"42","omit":"o","-":"skipped","tag":"embedded","count":3}`
	seeds := []string{
		full,
		`{}`, `null`, ``, ` {} `, `{"s":"plain"}`, `[]`, `"str"`, `1`, `true`,
		`{"S":"case","I64":1,"NODE":{"NAME":"x"}}`, // keys match fields case-insensitively
		`{"s":"a","s":"b"}`,                        // a repeated key: the last wins
		`{"unknown":[1,{"x":2}],"s":"x"}`,          // unknown keys are skipped
		`{"i":null,"p":null,"m":null,"ints":null,"next":null,"raw":null}`,
		`{"raw":  [ 1 , 2 ] }`, `{"raw":"\u00e9"}`,
		`{"any":1e308}`, `{"any":-0}`, `{"any":[[[[]]]]}`,
		// Numbers at and past each type's range, and in forms an integer
		// field refuses.
		`{"i8":127}`, `{"i8":128}`, `{"u8":-1}`, `{"u64":18446744073709551616}`,
		`{"i64":-9223372036854775809}`, `{"i":1.0}`, `{"i":1e2}`, `{"i":01}`, `{"i":-}`,
		`{"f64":1e309}`, `{"f32":3.5e38}`, `{"f64":4.9e-324}`, `{"f64":1e-400}`,
		`{"f64":123456789012345678901234567890}`, `{"any":123456789012345678901234567890}`,
		`{"quoted":"9223372036854775808"}`, `{"quoted":42}`, `{"quoted":"x"}`, `{"quoted":"null"}`,
		`{"quoted":"00"}`, `{"quoted":"-01"}`, `{"quoted":" 1"}`, `{"quoted":"1e2"}`,
		// Escapes, unicode, and bytes that are not UTF-8.
		`{"s":"\u00e9\u20ac\ud834\udd1e"}`, `{"s":"\ud800"}`, `{"s":"\udc00\ud800"}`,
		`{"s":"\"\\\/\b\f\n\r\t"}`, `{"s":"\u0000"}`, `{"s":"\x"}`, `{"s":"\u12"}`,
		"{\"s\":\"\xff\xfe\"}", "{\"s\":\"\xc3\"}", "{\"s\":\"\xed\xa0\x80\"}",
		"{\"s\":\"tab\there\"}", "{\"\xff\":1}", "{\"m\":{\"\xff\":1}}",
		`{"bytes":"not base64!"}`, `{"bytes":"aGVsbG8"}`, `{"bytes":[1,2]}`, `{"bytes":"00="}`,
		"{\"s\":\"\x01\x1f\"}", `{"zz":"\0"}`, `{"zz":"\u12zz"}`, `{"any":"\x"}`,
		`{"arr":[1,2,3]}`, `{"arr":[1]}`, `{"mi":{"x":"y"}}`, `{"mi":{"1.5":"y"}}`,
		`{"pp":null}`, `{"b":"true"}`, `{"b":1}`, `{"s":1}`, `{"ints":{}}`, `{"node":[]}`,
		// Truncated and broken.
		`{`, `{"s"`, `{"s":`, `{"s":"x`, `{"s":"x"`, `{"s":"x",}`, `{"ints":[1,2`, `{"s":"x"}}`,
		`{"s":"x"} {}`, `{"s":"x"}x`, `{"i":1 2}`, `{'s':'x'}`, `{s:"x"}`, "\xef\xbb\xbf{}",
		`{"any":NaN}`, `{"f64":Infinity}`, `{"b":tru}`, `{"b":nul}`,
	}
	// Deep nesting, at depths either side of the decoders' limits.
	for _, depth := range []int{100, 1000, 5000} {
		seeds = append(seeds, `{"any":`+strings.Repeat("[", depth)+strings.Repeat("]", depth)+`}`)
		seeds = append(seeds, strings.Repeat(`{"next":`, depth)+`{}`+strings.Repeat(`}`, depth))
	}
	seeds = append(seeds, `{"any":`+strings.Repeat("[", 20000)) // unterminated
	return seeds
}
