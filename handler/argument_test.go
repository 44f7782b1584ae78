package handler_test

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/proto"
)

// errArgs is the argument of the route TestArgumentErrors calls.
type errArgs struct {
	A     int64            `json:"a"`
	B     int64            `json:"b"`
	S     string           `json:"s"`
	F     float32          `json:"f"`
	OK    bool             `json:"ok"`
	Items []errItem        `json:"items"`
	M     map[string]int   `json:"m"`
	MI    map[int]string   `json:"mi"`
	Q     int64            `json:"q,string"`
	When  time.Time        `json:"when"`
	Inner *struct{ N int } `json:"inner"`
}

type errItem struct {
	X uint8 `json:"x"`
}

// TestArgumentErrors: an argument that does not decode is refused with a
// message that names the route, the field as the JSON names it, what was
// wanted and what came, and the byte where it begins (counted from 1), or
// what is not JSON and where; never sonic's text, nor the input around
// the error.
func TestArgumentErrors(t *testing.T) {
	const route = "Test/Args"
	reg := handler.NewRegistry()
	reg.Handle(route, handler.Func(func(context.Context, errArgs) (int, error) { return 0, nil }))
	rt := reg.Lookup([]byte(route))
	serve := func(in string) error {
		call := &handler.Call{Codec: proto.CodecJSON, Route: route}
		call.Start(context.Background(), time.Time{})
		defer call.End()
		_, err := rt.Serve(call, []byte(in), nil)
		return err
	}
	long := `{"s":"` + strings.Repeat("x", 70<<10) + `",`
	for _, tt := range []struct {
		name, in, want string
	}{
		{"a string for a number", `{"a":"x","b":2}`, `field "a": want a number, got a string at byte 6`},
		{"cut short", `{"a":1,`, `not valid JSON: it ends at byte 7, before the value is complete`},
		{"trailing comma", `{"a":1,}`, `not valid JSON: unexpected '}' at byte 8, where a key belongs`},
		{"no colon", `{"a" 1}`, `not valid JSON: unexpected '1' at byte 6, where ':' belongs`},
		{"after the value", `{"a":1}x`, `not valid JSON: unexpected 'x' at byte 8, after the value`},
		{"unquoted key", `{a:1}`, `not valid JSON: unexpected 'a' at byte 2, where a key belongs`},
		{"bad escape", `{"s":"a\qb"}`, `not valid JSON: unexpected 'q' at byte 9, in a string's escape`},
		{"control character", "{\"s\":\"a\x01b\"}", `not valid JSON: unexpected byte 0x01 at byte 8, in a string`},
		{"leading zero", `{"a":01}`, `not valid JSON: unexpected '1' at byte 7, where ',' or '}' belongs`},
		{"only spaces", "  \n", `not valid JSON: no value`},
		{"an array for the object", `[1,2]`, `want an object, got an array at byte 1`},
		{"a string for the object", ` "x"`, `want an object, got a string at byte 2`},
		{"an object for a number", `{"a":{"z":1}}`, `field "a": want a number, got an object at byte 6`},
		{"a boolean for a number", `{"b":true}`, `field "b": want a number, got a boolean at byte 6`},
		{"a number for a string", `{"s":5}`, `field "s": want a string, got a number at byte 6`},
		{"a number for a boolean", `{"ok":1}`, `field "ok": want true or false, got a number at byte 7`},
		{"a fraction for an integer", `{"a":1.5}`, `field "a": want an integer, got 1.5 at byte 6`},
		{"past int64", `{"a":99999999999999999999}`, `field "a": 99999999999999999999 is out of range for int64 at byte 6`},
		{"past float32", `{"f":1e300}`, `field "f": 1e300 is out of range for float32 at byte 6`},
		{"in an array of objects", `{"items":[{"x":1},{"x":-1}]}`, `field "items[1].x": -1 is out of range for uint8 at byte 24`},
		{"an object for an array", `{"items":{"x":1}}`, `field "items": want an array, got an object at byte 10`},
		{"in a map", `{"m":{"k":"v"}}`, `field "m.k": want a number, got a string at byte 11`},
		{"a map key", `{"mi":{"zz":"v"}}`, `field "mi": key "zz" is not a number at byte 8`},
		{"nested struct", `{"inner":{"N":"x"}}`, `field "inner.N": want a number, got a string at byte 15`},
		{"a ,string field", `{"q":"zz"}`, `field "q": does not decode at byte 6`},
		{"a type's own decoder", `{"when":"yesterday"}`, `parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"`},
		{"past the limit, cut short", long, `not valid JSON: it ends at byte ` + strconv.Itoa(len(long)) + `, before the value is complete`},
		{"past the limit, a string for a number", long + `"a":"y"}`, `field "a": want a number, got a string at byte ` + strconv.Itoa(len(long)+5)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := serve(tt.in)
			var e *handler.Error
			if !errors.As(err, &e) || e.Code != proto.CodeInvalidArgument || !e.Unprocessed {
				t.Fatalf("error %#v, want InvalidArgument marked Unprocessed", err)
			}
			if want := route + ": argument: " + tt.want; e.Message != want {
				t.Errorf("message\n%q\nwant\n%q", e.Message, want)
			}
			if msg := checkArgumentMessage(route, []byte(tt.in), e.Message); msg != "" {
				t.Error(msg)
			}
		})
	}

	// A reply that does not decode says so in the same words.
	var out struct{ N int }
	err := transport.DecodeReply("Test/Reply", []byte(`{"N":"seven"}`), &out)
	if want := `rpcd: invalid argument: decoding the reply of Test/Reply: field "N": want a number, got a string at byte 6`; err == nil || err.Error() != want {
		t.Errorf("DecodeReply: %v, want %s", err, want)
	}
}

var atByte = regexp.MustCompile(`at byte (\d+)`)

// checkArgumentMessage returns what is wrong with the message of the
// error a typed route gave for the argument in: it begins with the route
// and "argument: ", holds none of sonic's words nor encoding/json's, no
// line breaks, no more than 60 bytes of in, and its byte position, if it
// has one, is within in.
func checkArgumentMessage(route string, in []byte, msg string) string {
	if !strings.HasPrefix(msg, route+": argument: ") {
		return "message " + strconv.Quote(msg) + " does not begin with the route and \"argument: \""
	}
	for _, bad := range []string{"\n", "\t", "Syntax error", "Mismatch", "mismatched", "at index", "json: ", "sonic", "rpcd: "} {
		if strings.Contains(msg, bad) {
			return "message " + strconv.Quote(msg) + " holds " + strconv.Quote(bad)
		}
	}
	if len(in) > 60 && strings.Contains(msg, string(in[:60])) {
		return "message " + strconv.Quote(msg) + " quotes the input"
	}
	for _, m := range atByte.FindAllStringSubmatch(msg, -1) {
		if n, _ := strconv.Atoi(m[1]); n < 1 || n > len(in) {
			return "message " + strconv.Quote(msg) + " names byte " + m[1] + " of " + strconv.Itoa(len(in))
		}
	}
	return ""
}
