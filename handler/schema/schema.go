package schema

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Schema is a JSON Schema (draft 2020-12) of the JSON a typed route takes
// or answers, derived from a Go type as rpcd's JSON codec encodes it: the
// few keywords descriptions use. A schema is its own resource: a $ref
// points into the $defs of the schema it is part of, which only a
// recursive type needs. The zero Schema, {}, takes any value.
//
// A Go type that encodes itself (MarshalJSON, or UnmarshalJSON for an
// argument) is described as any value, unless it has a method
// JSONSchema() *Schema, which then gives its schema.
type Schema struct {
	Ref                  string             `json:"$ref,omitempty"`
	Title                string             `json:"title,omitempty"` // the Go type, for a named type of a package ("builtin.SumArgs")
	Description          string             `json:"description,omitempty"`
	Type                 Types              `json:"type,omitempty"`
	Format               string             `json:"format,omitempty"`          // int32, int64, float, double, date-time
	ContentEncoding      string             `json:"contentEncoding,omitempty"` // base64, for []byte
	Minimum              *int64             `json:"minimum,omitempty"`
	Maximum              *int64             `json:"maximum,omitempty"`
	Items                *Schema            `json:"items,omitempty"`
	MinItems             *int               `json:"minItems,omitempty"`
	MaxItems             *int               `json:"maxItems,omitempty"`
	Properties           Properties         `json:"properties,omitempty"`
	Required             []string           `json:"required,omitempty"`
	AdditionalProperties *Schema            `json:"additionalProperties,omitempty"`
	AnyOf                []*Schema          `json:"anyOf,omitempty"`
	Defs                 map[string]*Schema `json:"$defs,omitempty"`
}

// MarshalJSON encodes s as encoding/json does, whichever encoder asks
// (sonic, for Sys/Describe's reply, would write $defs in any order): the
// same schema is always the same bytes.
func (s Schema) MarshalJSON() ([]byte, error) {
	type plain Schema // Schema's fields, without this method
	return json.Marshal(plain(s))
}

// JSONSchema is the schema of a Schema in a description: an object, as
// draft 2020-12 defines it.
func (Schema) JSONSchema() *Schema {
	return &Schema{Type: Types{"object"}, Description: "a JSON Schema, draft 2020-12"}
}

// Types is a schema's "type": one JSON type, encoded as a string, or
// several ("null" with another, for a Go pointer, slice or map), encoded
// as an array.
type Types []string

// MarshalJSON encodes one type as a string, more as an array.
func (t Types) MarshalJSON() ([]byte, error) {
	if len(t) == 1 {
		return json.Marshal(t[0])
	}
	return json.Marshal([]string(t))
}

// UnmarshalJSON decodes a string or an array of strings.
func (t *Types) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*t = Types{one}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(t))
}

// Has reports whether typ is among t.
func (t Types) Has(typ string) bool {
	for _, x := range t {
		if x == typ {
			return true
		}
	}
	return false
}

// Property is one property of an object schema.
type Property struct {
	Name   string
	Schema *Schema
}

// Properties are an object schema's "properties", in the order the Go
// struct declares its fields (and the order its JSON has them).
type Properties []Property

// MarshalJSON encodes the properties as one object, in order.
func (ps Properties) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, p := range ps {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(p.Name)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(p.Schema)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON decodes an object of schemas, keeping its order.
func (ps *Properties) UnmarshalJSON(b []byte) error {
	d := json.NewDecoder(bytes.NewReader(b))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return errors.New("rpcd: schema properties: want an object")
	}
	*ps = (*ps)[:0]
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return err
		}
		var s Schema
		if err := d.Decode(&s); err != nil {
			return err
		}
		*ps = append(*ps, Property{Name: tok.(string), Schema: &s})
	}
	_, err := d.Token()
	return err
}

// Get returns the schema of the property called name, or nil.
func (ps Properties) Get(name string) *Schema {
	for _, p := range ps {
		if p.Name == name {
			return p.Schema
		}
	}
	return nil
}

// Argument returns the schema of the JSON a typed route with an argument
// of type t takes. Every property is optional: a missing one leaves the
// field's zero value.
func Argument(t reflect.Type) *Schema { return schemaFor(t, false) }

// Reply returns the schema of the JSON rpcd encodes a reply of type t as.
// An object's fields without omitempty or omitzero are required: they are
// always there.
func Reply(t reflect.Type) *Schema { return schemaFor(t, true) }

func schemaFor(t reflect.Type, reply bool) *Schema {
	g := &schemaGen{reply: reply, open: map[reflect.Type]*defState{}}
	s := g.schema(t)
	if len(g.defs) > 0 {
		root := *s
		root.Defs = g.defs
		s = &root
	}
	return s
}

// schemaGen derives the schema of one type.
type schemaGen struct {
	reply bool
	open  map[reflect.Type]*defState // named types being expanded, to find recursion
	defs  map[string]*Schema
	names map[string]reflect.Type // $defs names taken, and by which type
}

// defState is a named type being expanded: recursive once it is met again
// inside itself; then it goes to $defs under name.
type defState struct {
	recursive bool
	name      string
}

// Dialect is the JSON Schema dialect of Schema.
const Dialect = "https://json-schema.org/draft/2020-12/schema"

var (
	typeTime            = reflect.TypeFor[time.Time]()
	typeSchemer         = reflect.TypeFor[interface{ JSONSchema() *Schema }]()
	typeMarshaler       = reflect.TypeFor[json.Marshaler]()
	typeUnmarshaler     = reflect.TypeFor[json.Unmarshaler]()
	typeTextMarshaler   = reflect.TypeFor[encoding.TextMarshaler]()
	typeTextUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// implements reports whether t or *t has the methods of iface.
func implements(t, iface reflect.Type) bool {
	return t.Implements(iface) || (t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(iface))
}

func (g *schemaGen) schema(t reflect.Type) *Schema {
	if t.Name() != "" && t.PkgPath() != "" && t.Kind() != reflect.Pointer {
		if st, ok := g.open[t]; ok {
			if !st.recursive {
				st.recursive, st.name = true, g.defName(t)
			}
			return &Schema{Ref: "#/$defs/" + st.name}
		}
		st := &defState{}
		g.open[t] = st
		s := g.expand(t)
		delete(g.open, t)
		if s.Title == "" {
			s.Title = t.String()
		}
		if !st.recursive {
			return s
		}
		if g.defs == nil {
			g.defs = map[string]*Schema{}
		}
		g.defs[st.name] = s
		return &Schema{Ref: "#/$defs/" + st.name}
	}
	return g.expand(t)
}

// defName returns the $defs name of t: its name, with the characters a
// component name of OpenAPI may not have replaced by '_', and a number
// added if another type has it.
func (g *schemaGen) defName(t reflect.Type) string {
	base := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, t.Name())
	if g.names == nil {
		g.names = map[string]reflect.Type{}
	}
	name := base
	for i := 2; ; i++ {
		if other, taken := g.names[name]; !taken || other == t {
			break
		}
		name = base + "_" + strconv.Itoa(i)
	}
	g.names[name] = t
	return name
}

// expand returns t's schema, written out.
func (g *schemaGen) expand(t reflect.Type) *Schema {
	switch t.Kind() {
	case reflect.Pointer:
		return nullable(g.schema(t.Elem())) // null, or what the value's methods say
	case reflect.Interface:
		return &Schema{} // any value
	}
	if implements(t, typeSchemer) {
		v := reflect.New(t)
		var s *Schema
		if t.Implements(typeSchemer) {
			s = v.Elem().Interface().(interface{ JSONSchema() *Schema }).JSONSchema()
		} else {
			s = v.Interface().(interface{ JSONSchema() *Schema }).JSONSchema()
		}
		if s == nil {
			return &Schema{}
		}
		c := *s
		return &c
	}
	if t == typeTime {
		return &Schema{Type: Types{"string"}, Format: "date-time"}
	}
	if g.reply && implements(t, typeMarshaler) || !g.reply && implements(t, typeUnmarshaler) {
		return &Schema{} // encodes itself: any JSON
	}
	if g.reply && implements(t, typeTextMarshaler) || !g.reply && implements(t, typeTextUnmarshaler) {
		return &Schema{Type: Types{"string"}}
	}
	switch t.Kind() {
	case reflect.Bool:
		return &Schema{Type: Types{"boolean"}}
	case reflect.Int8:
		return intSchema(-1<<7, 1<<7-1)
	case reflect.Int16:
		return intSchema(-1<<15, 1<<15-1)
	case reflect.Int32:
		return &Schema{Type: Types{"integer"}, Format: "int32"}
	case reflect.Int, reflect.Int64:
		return &Schema{Type: Types{"integer"}, Format: "int64"}
	case reflect.Uint8:
		return intSchema(0, 1<<8-1)
	case reflect.Uint16:
		return intSchema(0, 1<<16-1)
	case reflect.Uint32:
		return intSchema(0, 1<<32-1)
	case reflect.Uint, reflect.Uint64, reflect.Uintptr:
		zero := int64(0)
		return &Schema{Type: Types{"integer"}, Minimum: &zero}
	case reflect.Float32:
		return &Schema{Type: Types{"number"}, Format: "float"}
	case reflect.Float64:
		return &Schema{Type: Types{"number"}, Format: "double"}
	case reflect.String:
		return &Schema{Type: Types{"string"}}
	case reflect.Slice:
		if e := t.Elem(); e.Kind() == reflect.Uint8 && !implements(e, typeMarshaler) && !implements(e, typeTextMarshaler) {
			return &Schema{Type: Types{"string", "null"}, ContentEncoding: "base64"}
		}
		return &Schema{Type: Types{"array", "null"}, Items: g.schema(t.Elem())}
	case reflect.Array:
		n := t.Len()
		return &Schema{Type: Types{"array"}, Items: g.schema(t.Elem()), MinItems: &n, MaxItems: &n}
	case reflect.Map:
		if !validMapKey(t.Key()) {
			return &Schema{Description: "not JSON: a Go " + t.String()}
		}
		return &Schema{Type: Types{"object", "null"}, AdditionalProperties: g.schema(t.Elem())}
	case reflect.Struct:
		return g.object(t)
	}
	return &Schema{Description: "not JSON: a Go " + t.String()} // chan, func, complex
}

func intSchema(lo, hi int64) *Schema {
	return &Schema{Type: Types{"integer"}, Minimum: &lo, Maximum: &hi}
}

// validMapKey reports whether encoding/json encodes maps with keys of
// type k: strings, integers, and TextMarshalers.
func validMapKey(k reflect.Type) bool {
	switch k.Kind() {
	case reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	}
	return implements(k, typeTextMarshaler)
}

// nullable returns s that also takes null.
func nullable(s *Schema) *Schema {
	switch {
	case s.Ref != "" || len(s.AnyOf) > 0:
		return &Schema{AnyOf: []*Schema{s, {Type: Types{"null"}}}}
	case len(s.Type) == 0 || s.Type.Has("null"):
		return s // any, or already nullable
	}
	c := *s
	c.Type = append(append(Types{}, s.Type...), "null")
	return &c
}

// object is the schema of struct type t.
func (g *schemaGen) object(t reflect.Type) *Schema {
	s := &Schema{Type: Types{"object"}}
	for _, f := range jsonFields(t) {
		var fs *Schema
		if f.quoted {
			fs = &Schema{Type: Types{"string"}}
			if f.typ.Kind() == reflect.Pointer {
				fs = nullable(fs)
			}
		} else {
			fs = g.schema(f.typ)
		}
		s.Properties = append(s.Properties, Property{Name: f.name, Schema: fs})
		if g.reply && !f.omit {
			s.Required = append(s.Required, f.name)
		}
	}
	return s
}

// jsonField is a field of a struct as encoding/json sees it.
type jsonField struct {
	name   string
	tagged bool
	index  []int
	typ    reflect.Type
	omit   bool // omitempty or omitzero: may be left out
	quoted bool // the ",string" option on a scalar
}

// jsonFields returns the fields encoding/json (and sonic, which follows
// it) encodes for struct type t, in order: exported fields by their json
// tag's name or their own, the fields of embedded structs without a name
// in the tag promoted, a name that more than one field has at the
// shallowest depth given to the one tagged, or to none.
func jsonFields(t reflect.Type) []jsonField {
	var fields []jsonField
	next := []jsonField{{typ: t}}
	visited := map[reflect.Type]bool{}
	for len(next) > 0 {
		current := next
		next = nil
		for _, f := range current {
			if visited[f.typ] {
				continue
			}
			visited[f.typ] = true
			for i := 0; i < f.typ.NumField(); i++ {
				sf := f.typ.Field(i)
				if sf.Anonymous {
					ft := sf.Type
					if ft.Kind() == reflect.Pointer {
						ft = ft.Elem()
					}
					if !sf.IsExported() && ft.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				if !validTag(name) {
					name = ""
				}
				index := append(append([]int(nil), f.index...), i)
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name != "" || !sf.Anonymous || ft.Kind() != reflect.Struct {
					jf := jsonField{name: name, tagged: name != "", index: index, typ: sf.Type}
					if name == "" {
						jf.name = sf.Name
					}
					for o := range strings.SplitSeq(opts, ",") {
						switch o {
						case "omitempty", "omitzero":
							jf.omit = true
						case "string":
							switch ft.Kind() {
							case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
								reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
								reflect.Float32, reflect.Float64, reflect.String:
								jf.quoted = true
							}
						}
					}
					fields = append(fields, jf)
					continue
				}
				next = append(next, jsonField{index: index, typ: ft})
			}
		}
	}
	// By name, then depth, then tagged first, then order: the first of a
	// name's run is the one that wins, if any does.
	sort.SliceStable(fields, func(i, j int) bool {
		a, b := fields[i], fields[j]
		switch {
		case a.name != b.name:
			return a.name < b.name
		case len(a.index) != len(b.index):
			return len(a.index) < len(b.index)
		case a.tagged != b.tagged:
			return a.tagged
		}
		return lessIndex(a.index, b.index)
	})
	out := fields[:0:0]
	for i := 0; i < len(fields); {
		j := i + 1
		for j < len(fields) && fields[j].name == fields[i].name {
			j++
		}
		run := fields[i:j]
		if len(run) == 1 || len(run[1].index) > len(run[0].index) || run[0].tagged && !run[1].tagged {
			out = append(out, run[0])
		}
		i = j
	}
	sort.Slice(out, func(i, j int) bool { return lessIndex(out[i].index, out[j].index) })
	return out
}

func lessIndex(a, b []int) bool {
	for k := 0; k < len(a) && k < len(b); k++ {
		if a[k] != b[k] {
			return a[k] < b[k]
		}
	}
	return len(a) < len(b)
}

// validTag reports whether s is a name encoding/json takes from a tag.
func validTag(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c > 0x7f:
		default:
			return false
		}
	}
	return true
}
