package schema

import (
	"cmp"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// RenderJSON renders the descriptions in b, a JSON array as Sys/Describe
// answers it (Descriptions), as Render does, a blank line between two.
func RenderJSON(b []byte) (string, error) {
	var ds []Description
	if err := json.Unmarshal(b, &ds); err != nil {
		return "", fmt.Errorf("rpcd: the descriptions do not decode: %w", err)
	}
	var sb strings.Builder
	for i, d := range ds {
		if i > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString(Render(d))
	}
	return sb.String(), nil
}

// Render writes d for people, as `rpcd describe` prints it: its name and
// kind on the first line ("typed", "raw" or "stream", with "blocking" or
// "inline"), then a typed route's argument, reply and recursive types in a
// Go-like form, one label to a line: "int64", "[]string", "*T",
// "map[string]T", "struct { name type }" (a named struct with its Go name
// instead of "struct"; a reply's field that may be left out marked
// "// omitempty"), "any", "string (date-time)", "[]byte" for base64. A
// recursive type is named where it is used and written out below.
func Render(d Description) string {
	var b strings.Builder
	b.WriteString(d.Name + ": " + d.Kind)
	if d.Blocking {
		b.WriteString(", blocking")
	}
	if d.Inline {
		b.WriteString(", inline")
	}
	switch d.Kind {
	case KindRaw:
		b.WriteString(": bytes in, bytes out, in the request's codec")
	case KindStream:
		b.WriteString(": bytes both ways")
	}
	b.WriteByte('\n')
	if d.Kind != KindTyped {
		return b.String()
	}
	type entry struct {
		label string
		s     *Schema
		reply bool
	}
	entries := []entry{{"argument", d.Argument, false}, {"reply", d.Reply, true}}
	seen := map[string]bool{}
	for _, e := range entries[:2] {
		if e.s == nil {
			continue
		}
		names := make([]string, 0, len(e.s.Defs))
		for name := range e.s.Defs {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if !seen[name] {
				seen[name] = true
				entries = append(entries, entry{name, e.s.Defs[name], e.reply})
			}
		}
	}
	width := 0
	for _, e := range entries {
		width = max(width, len(e.label))
	}
	for _, e := range entries {
		text := "none"
		if e.s != nil {
			text = goType(e.s, e.reply, "  ")
		}
		fmt.Fprintf(&b, "  %-*s %s\n", width, e.label, text)
	}
	return b.String()
}

// goType renders s as a Go-like type; indent is the indentation of the
// line it begins on, for a struct's fields. reply marks the fields a
// reply may leave out.
func goType(s *Schema, reply bool, indent string) string {
	if s.Ref != "" {
		return s.Ref[strings.LastIndexByte(s.Ref, '/')+1:]
	}
	if len(s.AnyOf) == 2 && len(s.AnyOf[1].Type) == 1 && s.AnyOf[1].Type[0] == "null" {
		return "*" + goType(s.AnyOf[0], reply, indent)
	}
	if len(s.AnyOf) > 0 {
		alts := make([]string, len(s.AnyOf))
		for i, a := range s.AnyOf {
			alts[i] = goType(a, reply, indent)
		}
		return named(s.Title, "one of: "+strings.Join(alts, " | "))
	}
	var types []string
	null := false
	for _, t := range s.Type {
		if t == "null" {
			null = true
		} else {
			types = append(types, t)
		}
	}
	if len(types) != 1 {
		switch {
		case len(types) > 1:
			return named(s.Title, strings.Join(s.Type, " | "))
		case null:
			return "null"
		case s.Description != "":
			return named(s.Title, "any: "+s.Description)
		}
		return named(s.Title, "any")
	}
	star := ""
	if null {
		star = "*"
	}
	switch types[0] {
	case "boolean":
		return star + named(s.Title, "bool")
	case "integer":
		return star + named(s.Title, cmp.Or(IntegerType(s), "integer"))
	case "number":
		n := map[string]string{"float": "float32", "double": "float64"}[s.Format]
		if n == "" {
			n = "number"
		}
		return star + named(s.Title, n)
	case "string":
		switch {
		case s.ContentEncoding == "base64":
			return named(s.Title, "[]byte")
		case s.Format != "" && s.Title != "":
			return star + s.Title + " (string, " + s.Format + ")"
		case s.Format != "":
			return star + "string (" + s.Format + ")"
		}
		return star + named(s.Title, "string")
	case "array":
		items := "any"
		if s.Items != nil {
			items = goType(s.Items, reply, indent)
		}
		if s.MinItems != nil && s.MaxItems != nil && *s.MinItems == *s.MaxItems {
			return named(s.Title, fmt.Sprintf("[%d]%s", *s.MinItems, items))
		}
		return named(s.Title, "[]"+items)
	case "object":
		if len(s.Properties) == 0 && s.AdditionalProperties != nil {
			return named(s.Title, "map[string]"+goType(s.AdditionalProperties, reply, indent))
		}
		head := "struct"
		if s.Title != "" {
			head = s.Title
		}
		if len(s.Properties) == 0 && s.Description != "" {
			return star + named(s.Title, s.Description)
		}
		if len(s.Properties) == 0 {
			return star + head + " {}"
		}
		required := map[string]bool{}
		for _, r := range s.Required {
			required[r] = true
		}
		// Names in a column, and types too where one-line types are
		// followed by a comment.
		types := make([]string, len(s.Properties))
		nameWidth, typeWidth := 0, 0
		for i, p := range s.Properties {
			types[i] = goType(p.Schema, reply, indent+"  ")
			nameWidth = max(nameWidth, len(p.Name))
			if !strings.Contains(types[i], "\n") {
				typeWidth = max(typeWidth, len(types[i]))
			}
		}
		var b strings.Builder
		b.WriteString(star + head + " {\n")
		for i, p := range s.Properties {
			line := fmt.Sprintf("%s  %-*s %s", indent, nameWidth, p.Name, types[i])
			if reply && !required[p.Name] {
				line += strings.Repeat(" ", max(typeWidth-len(types[i]), 0)) + "  // omitempty"
			}
			b.WriteString(line + "\n")
		}
		b.WriteString(indent + "}")
		return b.String()
	}
	return named(s.Title, types[0])
}

// named is base under a type's Go name, if it has one: "time.Duration
// (int64)".
func named(title, base string) string {
	if title == "" {
		return base
	}
	return title + " (" + base + ")"
}

// IntegerType names the Go integer type an integer schema stands for: its
// format ("int32", "int64"), or the type whose range its bounds are (int8
// to uint64); "" when it says no more than "integer".
func IntegerType(s *Schema) string {
	switch s.Format {
	case "int32", "int64":
		return s.Format
	}
	if s.Minimum == nil {
		return ""
	}
	lo := *s.Minimum
	if s.Maximum == nil {
		if lo == 0 {
			return "uint64"
		}
		return ""
	}
	switch hi := *s.Maximum; {
	case lo == -1<<7 && hi == 1<<7-1:
		return "int8"
	case lo == -1<<15 && hi == 1<<15-1:
		return "int16"
	case lo == 0 && hi == 1<<8-1:
		return "uint8"
	case lo == 0 && hi == 1<<16-1:
		return "uint16"
	case lo == 0 && hi == 1<<32-1:
		return "uint32"
	}
	return ""
}
