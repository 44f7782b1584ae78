package gen

import (
	"cmp"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/rpcd/rpcd/handler/schema"
)

// kind is what a value of a type is, as the generators see it.
type kind int

const (
	kAny    kind = iota // any JSON value: {} or what the generators cannot say
	kNull               // only null
	kBool               // boolean
	kInt                // integer
	kFloat              // number
	kString             // string
	kBytes              // string, base64: a Go []byte
	kTime               // string, date-time: a Go time.Time
	kArray              // array of elem; length fixed when length >= 0
	kMap                // object of string keys to elem
	kRecord             // object with nothing said of its properties
	kObject             // object with properties: a named type
	kUnion              // one of alts (anyOf, or several JSON types)
)

// typ is a type of the model: a JSON value as a description's schema says
// it, in terms each generator can write.
type typ struct {
	k        kind
	nullable bool   // null too
	goName   string // kInt, kFloat: the Go type (int64, uint8, float32, ...)
	elem     *typ   // kArray's items, kMap's values
	length   int    // kArray: the fixed length, or -1
	obj      *object
	alts     []*typ
	note     string // what a comment may say of it: its Go type, its format, its description
}

// object is a named object type: a struct on the server.
type object struct {
	name   string // its identifier in the generated code
	title  string // its Go type on the server, if it has one ("builtin.SumArgs")
	desc   string
	fields []field
	key    string // the schema's canonical JSON: equal keys are one type
}

// field is a property of an object.
type field struct {
	json     string // its name in JSON
	t        *typ
	required bool // always there (a reply's field without omitempty)
}

// route is one route of the model.
type route struct {
	name     string // "Math/Sum"
	group    string // the identifier of the part before the first '/' ("Math"), or ""
	method   string // the identifier of the rest ("Sum"), unique in its group
	goName   string // the Go variable: group and method ("MathSum")
	kind     string // schema.KindTyped, KindRaw or KindStream
	blocking bool
	inline   bool
	arg      *typ // a typed route's
	reply    *typ
}

// model is what the generators write: the routes, sorted by name, and the
// named object types they use, in the order they are first met.
type model struct {
	routes  []*route
	objects []*object
	groups  []string // the groups, sorted
}

// reserved are the identifiers the generated code declares or imports
// itself, in any of the languages: no type or route takes them.
var reserved = map[string]bool{
	"Api": true, "RawRoute": true, "StreamRoute": true, "Client": true, "CallOptions": true,
	"RawCallOptions": true, "StreamOptions": true, "PayloadInit": true, "Reply": true,
	"Stream": true, "Metadata": true, "Any": true, "Dict": true, "List": true, "Optional": true,
	"None": true, "True": true, "False": true, "Codec": true, "Caller": true, "StreamOpener": true,
	"RawCaller": true, "Method": true, "Promise": true, "Record": true, "Uint8Array": true,
	"Error": true, "Object": true, "Array": true, "String": true, "Number": true, "Boolean": true,
	"Date": true, "Map": true, "Set": true, "Symbol": true, "JSON": true,
}

// build makes the model of ds. It refuses descriptions that name a route
// twice or have a kind it does not know.
func build(ds []schema.Description) (*model, error) {
	ds = append([]schema.Description(nil), ds...)
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].Name < ds[j].Name })
	b := &builder{byKey: map[string]*object{}, defs: map[string]*object{}}
	m := &model{}
	seen := map[string]bool{}
	taken := map[string]map[string]bool{} // identifiers in use, by group
	goNames := map[string]bool{}
	for _, d := range ds {
		if d.Name == "" {
			return nil, fmt.Errorf("rpcd: gen: a description without a route name")
		}
		if seen[d.Name] {
			return nil, fmt.Errorf("rpcd: gen: route %s is described twice", d.Name)
		}
		seen[d.Name] = true
		r := &route{name: d.Name, kind: d.Kind, blocking: d.Blocking, inline: d.Inline}
		g, rest, ok := strings.Cut(d.Name, "/")
		if !ok {
			g, rest = "", d.Name
		} else {
			g = ident(g)
		}
		r.group = g
		if taken[g] == nil {
			taken[g] = map[string]bool{}
			if g != "" {
				m.groups = append(m.groups, g)
			}
		}
		r.method = uniqueMethod(ident(rest), taken[g])
		r.goName = unique(g+r.method, goNames)
		switch d.Kind {
		case schema.KindTyped:
			hint := r.goName
			r.arg = b.typeOf(d.Argument, d.Argument, hint+"Argument")
			r.reply = b.typeOf(d.Reply, d.Reply, hint+"Reply")
		case schema.KindRaw, schema.KindStream:
		default:
			return nil, fmt.Errorf("rpcd: gen: route %s is of kind %q, want typed, raw or stream", d.Name, d.Kind)
		}
		m.routes = append(m.routes, r)
	}
	// Groups that are also the names of routes without a group: the group
	// keeps its name.
	for _, r := range m.routes {
		if r.group == "" && taken[r.method] != nil && r.method != "" {
			delete(taken[""], r.method)
			r.method = uniqueMethod(r.method+"Route", taken[""])
		}
	}
	sort.Strings(m.groups)
	m.objects = b.objects
	nameObjects(m.objects, goNames)
	return m, nil
}

// builder turns schemas into types.
type builder struct {
	objects []*object
	byKey   map[string]*object // by canonical JSON
	defs    map[string]*object // the $defs met, by their root's canonical JSON and name
}

// typeOf is s's type; root is the schema s is part of (for $ref), hint the
// name an object without a Go name of its own takes.
func (b *builder) typeOf(s, root *schema.Schema, hint string) *typ {
	if s == nil {
		return &typ{k: kAny}
	}
	if s.Ref != "" {
		return b.ref(s.Ref, root, hint)
	}
	if len(s.AnyOf) > 0 {
		// An object among the alternatives is named after the whole when
		// it is the only one, and numbered when it is not.
		base, objects := hint, 0
		if s.Title != "" {
			base = typeName(s.Title)
		}
		for _, a := range s.AnyOf {
			if len(a.Properties) > 0 {
				objects++
			}
		}
		var alts []*typ
		null := false
		for i, a := range s.AnyOf {
			if len(a.Type) == 1 && a.Type[0] == "null" && a.Ref == "" && len(a.AnyOf) == 0 {
				null = true
				continue
			}
			h := base
			if objects > 1 {
				h += "Alt" + strconv.Itoa(i+1)
			}
			alts = append(alts, b.typeOf(a, root, h))
		}
		var t *typ
		switch len(alts) {
		case 0:
			t = &typ{k: kNull}
		case 1:
			c := *alts[0]
			t = &c
		default:
			t = &typ{k: kUnion, alts: alts}
		}
		t.nullable = t.nullable || null
		t.note = joinNote(t.note, noteOf(s))
		return t
	}
	var types []string
	null := false
	for _, ty := range s.Type {
		if ty == "null" {
			null = true
		} else {
			types = append(types, ty)
		}
	}
	switch {
	case len(types) == 0 && null:
		return &typ{k: kNull, note: noteOf(s)}
	case len(types) == 0:
		return &typ{k: kAny, note: noteOf(s)}
	case len(types) > 1:
		alts := make([]*typ, len(types))
		for i, ty := range types {
			c := *s
			c.Type = schema.Types{ty}
			alts[i] = b.typeOf(&c, root, hint)
		}
		return &typ{k: kUnion, alts: alts, nullable: null, note: noteOf(s)}
	}
	t := &typ{nullable: null, note: noteOf(s)}
	switch types[0] {
	case "boolean":
		t.k = kBool
	case "integer":
		t.k, t.goName = kInt, cmp.Or(schema.IntegerType(s), "int64") // int64 when the schema says no more than "integer"
		t.note = joinNote(t.note, t.goName)
	case "number":
		t.k, t.goName = kFloat, "float64"
		if s.Format == "float" {
			t.goName = "float32"
		}
	case "string":
		switch {
		case s.ContentEncoding == "base64":
			t.k = kBytes
			t.note = joinNote(t.note, "base64")
		case s.Format == "date-time":
			t.k = kTime
			t.note = joinNote(t.note, "date-time (RFC 3339)")
		default:
			t.k = kString
			if s.Format != "" {
				t.note = joinNote(t.note, s.Format)
			}
		}
	case "array":
		t.k, t.length = kArray, -1
		t.elem = b.typeOf(s.Items, root, hint+"Item")
		if s.MinItems != nil && s.MaxItems != nil && *s.MinItems == *s.MaxItems {
			t.length = *s.MinItems
		}
	case "object":
		switch {
		case len(s.Properties) > 0:
			t.k, t.obj, t.note = kObject, b.object(s, root, hint), ""
		case s.AdditionalProperties != nil:
			t.k = kMap
			t.elem = b.typeOf(s.AdditionalProperties, root, hint+"Value")
		default:
			t.k = kRecord
		}
	default:
		t.k = kAny
	}
	return t
}

// ref resolves a $ref into root's $defs.
func (b *builder) ref(ref string, root *schema.Schema, hint string) *typ {
	name, ok := strings.CutPrefix(ref, "#/$defs/")
	def := root.Defs[name]
	if !ok || def == nil {
		return &typ{k: kAny, note: "unresolved " + ref}
	}
	if len(def.Properties) == 0 || !def.Type.Has("object") {
		// Only an object is named: a recursive array or map has no type
		// every language can say.
		return &typ{k: kAny, note: joinNote(def.Title, "recursive")}
	}
	rootKey := canonical(root)
	if o := b.defs[rootKey+"\x00"+name]; o != nil {
		return &typ{k: kObject, obj: o, nullable: def.Type.Has("null")}
	}
	if def.Title == "" {
		def = withTitle(def, name)
	}
	t := &typ{k: kObject, nullable: def.Type.Has("null")}
	t.obj = b.objectWith(def, root, hint, func(o *object) { b.defs[rootKey+"\x00"+name] = o })
	return t
}

func withTitle(s *schema.Schema, title string) *schema.Schema {
	c := *s
	c.Title = title
	return &c
}

// object returns the named type of an object schema with properties.
func (b *builder) object(s, root *schema.Schema, hint string) *object {
	return b.objectWith(s, root, hint, nil)
}

func (b *builder) objectWith(s, root *schema.Schema, hint string, register func(*object)) *object {
	key := canonical(s)
	if len(s.Defs) == 0 && hasRef(s) {
		key += "\x00" + canonical(root) // its $refs mean what root's $defs say
	}
	if o := b.byKey[key]; o != nil {
		if register != nil {
			register(o)
		}
		return o
	}
	o := &object{title: s.Title, desc: s.Description, key: key}
	o.name = hint
	if s.Title != "" {
		o.name = s.Title
	}
	b.byKey[key] = o
	if register != nil {
		register(o)
	}
	b.objects = append(b.objects, o)
	required := map[string]bool{}
	for _, r := range s.Required {
		required[r] = true
	}
	base := typeName(o.name)
	for _, p := range s.Properties {
		o.fields = append(o.fields, field{json: p.Name, t: b.typeOf(p.Schema, root, base+ident(p.Name)), required: required[p.Name]})
	}
	return o
}

// hasRef reports whether s has a $ref anywhere.
func hasRef(s *schema.Schema) bool {
	return strings.Contains(canonical(s), `"$ref"`)
}

// canonical is s as JSON: the same schema is always the same bytes.
func canonical(s *schema.Schema) string {
	if s == nil {
		return "null"
	}
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Sprintf("%p", s) // cannot happen: a Schema always encodes
	}
	return string(b)
}

// nameObjects gives each object an identifier: its Go type's name, or its
// hint; a name two objects want goes to neither as it is: each takes its Go
// package's name before it, and then a number, in the order they were met.
func nameObjects(objs []*object, taken map[string]bool) {
	want := make([]string, len(objs))
	count := map[string]int{}
	for i, o := range objs {
		want[i] = typeName(o.name)
		count[want[i]]++
	}
	used := map[string]bool{}
	for k := range taken {
		used[k] = true
	}
	for i, o := range objs {
		name := want[i]
		if count[name] > 1 || used[name] || reserved[name] {
			if pkg, _, ok := strings.Cut(o.title, "."); ok && o.title != "" {
				name = ident(pkg) + name
			}
		}
		o.name = unique(name, used)
	}
}

// typeName is the identifier of a Go type's name ("builtin.SumArgs" is
// SumArgs; "map[string]int" names nothing an identifier can say, and is
// MapStringInt).
func typeName(title string) string {
	if i := strings.LastIndexByte(title, '.'); i >= 0 && !strings.ContainsAny(title, "[]*") {
		title = title[i+1:]
	}
	return ident(title)
}

// ident turns s into an exported identifier that every generated language
// takes: its letters and digits, each run of them capitalized ("echo_string"
// is EchoString); "X" before a leading digit; "X" alone for none.
func ident(s string) string {
	var b strings.Builder
	up := true
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9':
			if up && c >= 'a' && c <= 'z' {
				c -= 'a' - 'A'
			}
			b.WriteRune(c)
			up = false
		default:
			up = true
		}
	}
	out := b.String()
	if out == "" || out[0] >= '0' && out[0] <= '9' {
		out = "X" + out
	}
	return out
}

// unique returns name, or name with the first number from 2 that makes it
// new, and marks it taken; reserved names are never returned.
func unique(name string, taken map[string]bool) string {
	n := name
	for i := 2; taken[n] || reserved[n]; i++ {
		n = name + strconv.Itoa(i)
	}
	taken[n] = true
	return n
}

// uniqueMethod is unique for the name of a route in its group: a property
// or method of its own, which may be what a type is called, but no word
// Python keeps.
func uniqueMethod(name string, taken map[string]bool) string {
	n := name
	for i := 2; taken[n] || n == "None" || n == "True" || n == "False"; i++ {
		n = name + strconv.Itoa(i)
	}
	taken[n] = true
	return n
}

// noteOf is what a comment may say of s: its Go type and its description.
func noteOf(s *schema.Schema) string {
	return joinNote(s.Title, s.Description)
}

func joinNote(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "" || strings.Contains(a, b):
		return a
	}
	return a + ", " + b
}
