package jsoncodec

import (
	"encoding/json"
	"math"
	"testing"
	"unicode/utf8"
)

// FuzzJSONString: the codec's own string paths agree with encoding/json.
func FuzzJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", `quo"te`, `back\slash`, "tab\tnew\nline\r", "\x00\x1f", "é€𝄞", "\xff\xfe", "<&>\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc := appendString([]byte("x"), s)[1:]
		if !json.Valid(enc) {
			t.Fatalf("appendString(%q) = %s, not JSON", s, enc)
		}
		// Invalid UTF-8 comes out as encoding/json writes it: U+FFFD.
		var back, want string
		std, _ := json.Marshal(s)
		_ = json.Unmarshal(std, &want)
		if err := json.Unmarshal(enc, &back); err != nil || back != want {
			t.Fatalf("appendString(%q) = %s, decodes to %q, %v; encoding/json writes %s", s, enc, back, err, std)
		}
		// Decoding: the fast path, when it takes an input, agrees with
		// encoding/json; when it does not, sonic runs.
		for _, in := range [][]byte{enc, []byte(s), []byte(" " + string(enc) + "\n")} {
			var fast string
			ok, err := unmarshalScalar(in, &fast)
			if !ok {
				continue
			}
			var want string
			if jerr := json.Unmarshal(in, &want); jerr != nil || err != nil || fast != want {
				t.Fatalf("unmarshalScalar(%q) = %q, %v; encoding/json: %q, %v", in, fast, err, want, jerr)
			}
		}
		// Through the codec either way, a string round-trips.
		if utf8.ValidString(s) {
			var got string
			if err := Unmarshal(enc, &got); err != nil || got != s {
				t.Fatalf("Unmarshal(%s) = %q, %v; want %q", enc, got, err, s)
			}
		}
	})
}

// FuzzJSONFloat: the codec writes floats as encoding/json does.
func FuzzJSONFloat(f *testing.F) {
	for _, v := range []float64{0, 1, -1, 0.1, 1e-7, 1e21, 123456789.125, math.MaxFloat64, math.SmallestNonzeroFloat64, math.Copysign(0, -1)} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		got, ok := appendScalar(nil, &v)
		want, err := json.Marshal(v)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			if ok {
				t.Fatalf("appendScalar took %v", v)
			}
			return
		}
		if !ok || err != nil || string(got) != string(want) {
			t.Fatalf("float64 %v: %s, encoding/json %s", v, got, want)
		}
		v32 := float32(v)
		got, ok = appendScalar(nil, &v32)
		want, err = json.Marshal(v32)
		if !math.IsInf(float64(v32), 0) && (!ok || err != nil || string(got) != string(want)) {
			t.Fatalf("float32 %v: %s, encoding/json %s", v32, got, want)
		}
	})
}

// TestJSONStrict: what the codec decodes is JSON as RFC 8259 has it, in
// any string, kept or skipped: control characters and bad escapes are
// refused (sonic lets them through unless told), invalid UTF-8 becomes
// U+FFFD as with encoding/json.
func TestJSONStrict(t *testing.T) {
	type args struct {
		S   string          `json:"s"`
		Raw json.RawMessage `json:"raw"`
	}
	for _, in := range []string{
		"{\"s\":\"a\x01\"}", `{"s":"\q"}`, `{"raw":"\0"}`, "{\"raw\":\"\x01\"}", `{"unknown":"\x"}`, `{"unknown":"\u12zz"}`,
	} {
		var v args
		if err := Unmarshal([]byte(in), &v); err == nil {
			t.Errorf("%q decoded without an error: %+v", in, v)
		}
		if json.Unmarshal([]byte(in), &v) == nil {
			t.Errorf("%q: encoding/json takes it; the case is wrong", in)
		}
	}
	for in, want := range map[string]string{
		"\"a\xffb\"": "a\ufffdb", "\"\xff\xfe\"": "\ufffd\ufffd", "\"é\"": "é",
	} {
		var v args
		if err := Unmarshal([]byte(`{"s":`+in+`}`), &v); err != nil || v.S != want {
			t.Errorf("%q in a struct: %q, %v; want %q", in, v.S, err, want)
		}
		var s string
		if err := Unmarshal([]byte(in), &s); err != nil || s != want {
			t.Errorf("%q alone: %q, %v; want %q", in, s, err, want)
		}
		out, err := Append(nil, &args{S: in[1 : len(in)-1]})
		if err != nil || !json.Valid(out) || !utf8.Valid(out) {
			t.Errorf("encoding %q: %s, %v", in, out, err)
		}
	}
}

func TestJSONScalars(t *testing.T) {
	cases := []struct {
		v    any
		want string
	}{
		{new(bool), "false"}, {ptr(true), "true"},
		{ptr(int(-3)), "-3"}, {ptr(int8(-128)), "-128"}, {ptr(int16(300)), "300"}, {ptr(int32(42)), "42"}, {ptr(int64(math.MinInt64)), "-9223372036854775808"},
		{ptr(uint(7)), "7"}, {ptr(uint8(255)), "255"}, {ptr(uint16(65535)), "65535"}, {ptr(uint32(1)), "1"}, {ptr(uint64(math.MaxUint64)), "18446744073709551615"},
		{ptr("hi"), `"hi"`},
	}
	for _, c := range cases {
		got, err := Append(nil, c.v)
		if err != nil || string(got) != c.want {
			t.Errorf("Append(%T) = %s, %v; want %s", c.v, got, err, c.want)
		}
	}
	// A nil pointer is null, as sonic and encoding/json write it; decoding
	// into one is an error. Neither panics (a client's Call with a nil
	// *int argument did).
	for _, v := range []any{(*string)(nil), (*bool)(nil), (*int)(nil), (*int8)(nil), (*int16)(nil), (*int32)(nil), (*int64)(nil),
		(*uint)(nil), (*uint8)(nil), (*uint16)(nil), (*uint32)(nil), (*uint64)(nil), (*float32)(nil), (*float64)(nil)} {
		if got, err := Append(nil, v); err != nil || string(got) != "null" {
			t.Errorf("Append(%T(nil)) = %s, %v; want null", v, got, err)
		}
	}
	if err := Unmarshal([]byte(`"x"`), (*string)(nil)); err == nil {
		t.Error("Unmarshal into a nil *string: no error")
	}
	nan := math.NaN()
	if _, err := Append(nil, &nan); err == nil {
		t.Error("NaN encoded without an error")
	}
}

func ptr[T any](v T) *T { return &v }

// TestJSONNoAliasing: nothing decoded refers to the request bytes, which
// the reactor reuses as soon as the handler returns.
func TestJSONNoAliasing(t *testing.T) {
	type doc struct {
		S   string          `json:"s"`
		Raw json.RawMessage `json:"raw"`
		M   map[string]string
		Any any `json:"any"`
	}
	req := []byte(`{"s":"plain","raw":{"k":"v"},"M":{"key":"val"},"any":"str"}`)
	var d doc
	if err := Unmarshal(req, &d); err != nil {
		t.Fatal(err)
	}
	for i := range req {
		req[i] = 'X'
	}
	if d.S != "plain" || string(d.Raw) != `{"k":"v"}` || d.M["key"] != "val" || d.Any != "str" {
		t.Fatalf("decoded values changed with the request bytes: %+v", d)
	}
	var s string
	bad := []byte(`"unterminated`)
	err := Unmarshal(bad, &s)
	if err == nil {
		t.Fatal("bad JSON decoded")
	}
	msg := err.Error()
	for i := range bad {
		bad[i] = 'X'
	}
	if err.Error() != msg {
		t.Fatalf("the error's text changed with the request bytes: %q then %q", msg, err.Error())
	}
}
