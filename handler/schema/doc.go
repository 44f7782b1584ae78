// Package schema says what the routes of a handler.Registry take and
// answer: each route's Description (its kind, where it runs, and for a
// typed route the JSON Schemas of its argument and reply), the schemas
// themselves, derived from Go types as rpcd's JSON codec encodes them
// (Argument, Reply), and Render, which writes a description in a Go-like
// form for people.
//
// It is what Sys/Describe answers (handler/builtin), what `rpcd describe`
// prints, and what the gateway's OpenAPI document holds. A typed route's
// schemas are derived on its first description, not at registration, and
// kept. A Go type describes itself with a method JSONSchema() *Schema.
//
//	reg.Handle("Math/Sum", handler.Func(sum))
//	d, _ := schema.Describe(reg, "Math/Sum")
//	fmt.Print(schema.Render(d))
package schema
