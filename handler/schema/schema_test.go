package schema_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/schema"
)

// The types the schema tests derive schemas from.
type (
	schemaInner struct {
		X int `json:"x"`
	}
	SchemaPromoted struct {
		P string `json:"p"`
		Q string // hidden by schemaAll's own Q
	}
	schemaHidden struct {
		Dup string // two at one depth, neither tagged: neither is written
	}
	schemaHidden2 struct {
		Dup string
	}
	schemaAll struct {
		Name     string          `json:"name"`
		Count    int32           `json:"count,omitempty"`
		Small    int8            `json:"small"`
		U16      uint16          `json:"u16"`
		U64      uint64          `json:"u64"`
		F        float32         `json:"f"`
		Ok       bool            `json:"ok"`
		Ptr      *int64          `json:"ptr"`
		List     []string        `json:"list"`
		Bytes    []byte          `json:"bytes"`
		Pair     [2]uint8        `json:"pair"`
		Map      map[string]int  `json:"map"`
		IntKeys  map[int]bool    `json:"int_keys"`
		Inner    schemaInner     `json:"inner"`
		InnerPtr *schemaInner    `json:"inner_ptr,omitempty"`
		When     time.Time       `json:"when"`
		Took     time.Duration   `json:"took"`
		Addr     netip.Addr      `json:"addr"` // a TextMarshaler: a string
		Raw      json.RawMessage `json:"raw"`  // encodes itself: anything
		Any      any             `json:"any"`
		Quoted   int             `json:"quoted,string"`
		Skipped  string          `json:"-"`
		//lint:ignore SA5008 a field named "-" is what this one is for
		Dash       string            `json:"-,"` // named "-"
		Untagged   string            // its Go name
		Q          string            // hides SchemaPromoted's Q
		Nested     map[string][]bool `json:"nested,omitzero"`
		unexported int
		SchemaPromoted
		schemaHidden
		schemaHidden2
	}
	schemaTree struct {
		Value int           `json:"value"`
		Kids  []schemaTree  `json:"kids"`
		Next  *schemaTree   `json:"next,omitempty"`
		List  schemaLinked  `json:"list"`
		Named schemaOwnType `json:"named"`
	}
	schemaLinked struct {
		Next *schemaLinked `json:"next"`
	}
	schemaOwnType struct{ v string }
)

func (schemaOwnType) JSONSchema() *schema.Schema {
	return &schema.Schema{Type: schema.Types{"string"}, Description: "its own"}
}
func (o schemaOwnType) MarshalJSON() ([]byte, error) { return json.Marshal(o.v) }

func compact(t *testing.T, s *schema.Schema) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSchemaGolden pins the schemas of Go types: each kind, tags,
// embedding, types that encode themselves, recursion.
func TestSchemaGolden(t *testing.T) {
	for _, tc := range []struct {
		name  string
		typ   reflect.Type
		reply bool
		want  string
	}{
		{"string", reflect.TypeFor[string](), false, `{"type":"string"}`},
		{"int", reflect.TypeFor[int](), false, `{"type":"integer","format":"int64"}`},
		{"int16", reflect.TypeFor[int16](), false, `{"type":"integer","minimum":-32768,"maximum":32767}`},
		{"uint32", reflect.TypeFor[uint32](), false, `{"type":"integer","minimum":0,"maximum":4294967295}`},
		{"uint", reflect.TypeFor[uint](), false, `{"type":"integer","minimum":0}`},
		{"float64", reflect.TypeFor[float64](), false, `{"type":"number","format":"double"}`},
		{"bool pointer", reflect.TypeFor[*bool](), false, `{"type":["boolean","null"]}`},
		{"bytes", reflect.TypeFor[[]byte](), false, `{"type":["string","null"],"contentEncoding":"base64"}`},
		{"byte array", reflect.TypeFor[[3]byte](), false, `{"type":"array","items":{"type":"integer","minimum":0,"maximum":255},"minItems":3,"maxItems":3}`},
		{"map", reflect.TypeFor[map[string]float32](), false, `{"type":["object","null"],"additionalProperties":{"type":"number","format":"float"}}`},
		{"any", reflect.TypeFor[any](), false, `{}`},
		{"interface", reflect.TypeFor[json.Marshaler](), true, `{"title":"json.Marshaler"}`},
		{"empty struct", reflect.TypeFor[struct{}](), false, `{"type":"object"}`},
		{"empty struct reply", reflect.TypeFor[struct{}](), true, `{"type":"object"}`},
		{"time", reflect.TypeFor[time.Time](), true, `{"title":"time.Time","type":"string","format":"date-time"}`},
		{"duration", reflect.TypeFor[time.Duration](), true, `{"title":"time.Duration","type":"integer","format":"int64"}`},
		{"own schema", reflect.TypeFor[schemaOwnType](), true, `{"title":"schema_test.schemaOwnType","description":"its own","type":"string"}`},
		{"func", reflect.TypeFor[func()](), true, `{"description":"not JSON: a Go func()"}`},
		{"struct argument", reflect.TypeFor[schemaInner](), false, `{"title":"schema_test.schemaInner","type":"object","properties":{"x":{"type":"integer","format":"int64"}}}`},
		{"struct reply", reflect.TypeFor[schemaInner](), true, `{"title":"schema_test.schemaInner","type":"object","properties":{"x":{"type":"integer","format":"int64"}},"required":["x"]}`},
		{"struct pointer", reflect.TypeFor[*schemaInner](), true, `{"title":"schema_test.schemaInner","type":["object","null"],"properties":{"x":{"type":"integer","format":"int64"}},"required":["x"]}`},
		{"linked list", reflect.TypeFor[schemaLinked](), true,
			`{"$ref":"#/$defs/schemaLinked","$defs":{"schemaLinked":{"title":"schema_test.schemaLinked","type":"object","properties":{"next":{"anyOf":[{"$ref":"#/$defs/schemaLinked"},{"type":"null"}]}},"required":["next"]}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := schema.Argument(tc.typ)
			if tc.reply {
				s = schema.Reply(tc.typ)
			}
			if got := compact(t, s); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestSchemaStructFields: a struct's properties are the keys rpcd's JSON
// codec writes for it, in its order, with the types the schema gives; in
// a reply the fields without omitempty or omitzero are required, in an
// argument none is.
func TestSchemaStructFields(t *testing.T) {
	typ := reflect.TypeFor[schemaAll]()
	s := schema.Reply(typ)
	var names []string
	for _, p := range s.Properties {
		names = append(names, p.Name)
	}
	want := "name count small u16 u64 f ok ptr list bytes pair map int_keys inner inner_ptr when took addr raw any quoted - Untagged Q nested p"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("properties %s\nwant       %s", got, want)
	}
	if got, want := strings.Join(s.Required, " "), "name small u16 u64 f ok ptr list bytes pair map int_keys inner when took addr raw any quoted - Untagged Q p"; got != want {
		t.Errorf("required %s\nwant     %s", got, want)
	}
	if a := schema.Argument(typ); len(a.Required) != 0 {
		t.Errorf("argument schema requires %v, want nothing", a.Required)
	}
	for name, want := range map[string]string{
		"quoted":   `{"type":"string"}`,
		"addr":     `{"title":"netip.Addr","type":"string"}`,
		"raw":      `{"title":"json.RawMessage"}`,
		"int_keys": `{"type":["object","null"],"additionalProperties":{"type":"boolean"}}`,
		"ptr":      `{"type":["integer","null"],"format":"int64"}`,
	} {
		if got := compact(t, s.Properties.Get(name)); got != want {
			t.Errorf("property %s: %s, want %s", name, got, want)
		}
	}

	// The keys the codec writes for a value with every field set, in order.
	v := fullAll()
	enc, err := handler.JSON.Append(nil, &v)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(objectKeys(t, enc), " "); got != want {
		t.Errorf("the codec writes %s\nthe schema has    %s", got, want)
	}
}

func fullAll() schemaAll {
	n := int64(7)
	return schemaAll{
		Name: "n", Count: 3, Small: -5, U16: 65535, U64: math.MaxUint64, F: 1.5, Ok: true, Ptr: &n,
		List: []string{"a"}, Bytes: []byte{1, 2, 3}, Pair: [2]uint8{1, 255}, Map: map[string]int{"k": 1},
		IntKeys: map[int]bool{4: true}, Inner: schemaInner{X: 1}, InnerPtr: &schemaInner{X: 2},
		When: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Took: time.Second, Addr: netip.MustParseAddr("10.0.0.1"),
		Raw: json.RawMessage(`[1,{"x":null}]`), Any: map[string]any{"z": 1.5}, Quoted: 42, Dash: "d",
		Untagged: "u", Q: "q", Nested: map[string][]bool{"b": {true}}, unexported: 1,
		SchemaPromoted: SchemaPromoted{P: "p", Q: "hidden"}, schemaHidden: schemaHidden{Dup: "x"}, schemaHidden2: schemaHidden2{Dup: "y"},
	}
}

// objectKeys returns the keys of the JSON object b, in order.
func objectKeys(t *testing.T, b []byte) []string {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", b)
	}
	var keys []string
	for d.More() {
		tok, _ := d.Token()
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// TestSchemaConforms: what rpcd's JSON codec writes for values of several
// types, zero and set, is valid by their reply and argument schemas, as a
// small validator of the keywords Schema has reads them; and values that
// are not are refused, so the validator is not a yes-man.
func TestSchemaConforms(t *testing.T) {
	n := 3
	tree := schemaTree{Value: 1, Kids: []schemaTree{{Value: 2, Kids: []schemaTree{{Value: 3}}}}, Next: &schemaTree{Value: 4},
		List: schemaLinked{Next: &schemaLinked{Next: &schemaLinked{}}}, Named: schemaOwnType{"own"}}
	for _, v := range []any{
		"s", 1, int8(-128), uint32(math.MaxUint32), 2.5, true, (*int)(nil), &n,
		[]int(nil), []int{1}, []byte("bytes"), [2]string{"a", "b"}, map[string]int(nil), map[uint8]string{1: "x"},
		schemaAll{}, fullAll(), &schemaAll{}, []*schemaAll{nil, {}}, schemaTree{}, tree, &tree, time.Now(),
		struct{}{}, []any{1, "x", nil},
	} {
		typ := reflect.TypeOf(v)
		enc, err := handler.JSON.Append(nil, v)
		if err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		for _, s := range []*schema.Schema{schema.Reply(typ), schema.Argument(typ)} {
			if err := validate(s, s, decodeJSON(t, enc)); err != nil {
				t.Errorf("%T %s: %v\nschema %s", v, enc, err, compact(t, s))
			}
		}
	}

	for _, tc := range []struct {
		typ  reflect.Type
		json string
	}{
		{reflect.TypeFor[string](), `1`},
		{reflect.TypeFor[int](), `1.5`},
		{reflect.TypeFor[int8](), `200`},
		{reflect.TypeFor[uint](), `-1`},
		{reflect.TypeFor[[]int](), `["x"]`},
		{reflect.TypeFor[[2]int](), `[1]`},
		{reflect.TypeFor[int](), `null`},
		{reflect.TypeFor[schemaInner](), `{}`},
		{reflect.TypeFor[schemaInner](), `{"x":"1"}`},
		{reflect.TypeFor[schemaTree](), `{"value":1,"kids":[{"value":"x"}],"list":{"next":null},"named":""}`},
		{reflect.TypeFor[time.Time](), `"yesterday"`},
		{reflect.TypeFor[[]byte](), `"!!"`},
	} {
		s := schema.Reply(tc.typ)
		if err := validate(s, s, decodeJSON(t, []byte(tc.json))); err == nil {
			t.Errorf("%v: %s is valid, want refused by %s", tc.typ, tc.json, compact(t, s))
		}
	}
}

func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return v
}

// validate checks v, decoded with UseNumber, against s, whose $refs point
// into root's $defs: the keywords Schema has, as draft 2020-12 reads them.
func validate(root, s *schema.Schema, v any) error {
	if s.Ref != "" {
		d := root.Defs[strings.TrimPrefix(s.Ref, "#/$defs/")]
		if d == nil {
			return fmt.Errorf("unresolved $ref %s", s.Ref)
		}
		if err := validate(root, d, v); err != nil {
			return err
		}
	}
	if len(s.AnyOf) > 0 {
		var errs []string
		for _, a := range s.AnyOf {
			err := validate(root, a, v)
			if err == nil {
				errs = nil
				break
			}
			errs = append(errs, err.Error())
		}
		if errs != nil {
			return fmt.Errorf("none of anyOf: %s", strings.Join(errs, "; "))
		}
	}
	if len(s.Type) > 0 && !s.Type.Has(jsonType(v)) && !(jsonType(v) == "integer" && s.Type.Has("number")) {
		return fmt.Errorf("%v is %s, want %v", v, jsonType(v), s.Type)
	}
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			if s.Minimum != nil && i < *s.Minimum || s.Maximum != nil && i > *s.Maximum {
				return fmt.Errorf("%v out of [%v, %v]", v, s.Minimum, s.Maximum)
			}
		} else if s.Minimum != nil && strings.HasPrefix(string(v), "-") {
			return fmt.Errorf("%v below %d", v, *s.Minimum)
		}
	case string:
		if s.Format == "date-time" {
			if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
				return err
			}
		}
		if s.ContentEncoding == "base64" {
			if _, err := base64.StdEncoding.DecodeString(v); err != nil {
				return err
			}
		}
	case []any:
		if s.MinItems != nil && len(v) < *s.MinItems || s.MaxItems != nil && len(v) > *s.MaxItems {
			return fmt.Errorf("%d items, want %v to %v", len(v), *s.MinItems, *s.MaxItems)
		}
		for i, e := range v {
			if s.Items != nil {
				if err := validate(root, s.Items, e); err != nil {
					return fmt.Errorf("[%d]: %w", i, err)
				}
			}
		}
	case map[string]any:
		for _, r := range s.Required {
			if _, ok := v[r]; !ok {
				return fmt.Errorf("no %q", r)
			}
		}
		for k, e := range v {
			ps := s.Properties.Get(k)
			if ps == nil {
				ps = s.AdditionalProperties
			}
			if ps != nil {
				if err := validate(root, ps, e); err != nil {
					return fmt.Errorf("%q: %w", k, err)
				}
			}
		}
	}
	return nil
}

func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		if _, err := v.Int64(); err == nil || !strings.ContainsAny(string(v), ".eE") {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	}
	return "object"
}

// TestSchemaJSONRoundTrip: a Schema decodes from the JSON it encodes to,
// its properties' order and its types kept.
func TestSchemaJSONRoundTrip(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[schemaAll](), reflect.TypeFor[schemaTree](), reflect.TypeFor[*int](), reflect.TypeFor[string]()} {
		want := compact(t, schema.Reply(typ))
		var s schema.Schema
		if err := json.Unmarshal([]byte(want), &s); err != nil {
			t.Fatalf("%v: %v", typ, err)
		}
		if got := compact(t, &s); got != want {
			t.Errorf("%v: round trip gave\n%s\nwant\n%s", typ, got, want)
		}
	}
}
