package gateway

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/schema"
	"github.com/rpcd/rpcd/proto"
)

// OpenAPIPath is where `rpcd serve -gateway` serves the gateway's OpenAPI
// document.
const OpenAPIPath = "/openapi.json"

// OpenAPIOptions says what a gateway's OpenAPI document says beside its
// routes. The zero OpenAPIOptions is valid.
type OpenAPIOptions struct {
	// Title and Version are the document's info; default "rpcd" and "1".
	Title, Version string

	// JSONRPCPath, if set, is where the gateway's JSONRPC handler is
	// mounted: the document describes it there.
	JSONRPCPath string
}

// The names the document gives its own components. A route's types, in
// components only when recursive, are named after their Go types, which
// have no dot.
const (
	oaError           = "rpcd.Error"
	oaJSONRPCRequest  = "rpcd.JSONRPCRequest"
	oaJSONRPCResponse = "rpcd.JSONRPCResponse"
	oaJSONRPCError    = "rpcd.JSONRPCError"
	oaBearer          = "bearer"
)

// errorStatuses are the statuses a call through the gateway can fail
// with, and what each stands for (docs/gateway.md, "Responses and
// errors").
var errorStatuses = []struct {
	status int
	what   string
}{
	{400, "InvalidArgument (an argument that does not decode, a bad header, a body that ends before its length or whose Content-Encoding lies), FailedPrecondition or OutOfRange"},
	{401, "Unauthenticated: no credentials, or credentials the server refuses (Authorization: Bearer TOKEN)"},
	{403, "PermissionDenied: the caller may not call the route"},
	{404, "NotFound: no such route, or the handler's NotFound"},
	{408, "DeadlineExceeded: the body did not arrive within the server's read timeout; the call was not run (unprocessed)"},
	{409, "AlreadyExists or Aborted"},
	{413, "ResourceExhausted: the body, or what it expands to, is past the frame limit less the route and metadata"},
	{415, "InvalidArgument: a Content-Type other than application/json or application/octet-stream, or a Content-Encoding other than zstd and gzip"},
	{429, "ResourceExhausted: a limit on calls (a rate limit), or a reply past the frame limit"},
	{431, "ResourceExhausted: the metadata the headers make is past the metadata limit"},
	{499, "Canceled: the call was cancelled"},
	{500, "Internal (a handler's panic), Unknown, DataLoss, or a code rpcd does not know"},
	{501, "Unimplemented"},
	{503, "Unavailable: the server is draining; the call was not run (unprocessed) and may be sent again"},
	{504, "DeadlineExceeded: the Rpcd-Timeout or the request's deadline passed"},
}

// jsonrpcStatuses are the statuses the JSON-RPC handler fails a request
// with before any call; a call's own errors are in its response object.
var jsonrpcStatuses = []int{400, 401, 408, 413, 415, 429, 431}

// OpenAPI returns the handler of the gateway's OpenAPI 3.1 document
// (OpenAPIDocument), for GET and HEAD, its responses counted in Stats
// under RouteOpenAPI. With an Authenticator, it takes the
// credentials a call takes, and answers 401 without them. The document is
// built from the registry at each request, so that routes registered while
// serving are in it; the routes' schemas are derived once.
func (g *Gateway) OpenAPI(opts OpenAPIOptions) http.Handler {
	tl := tally{route: RouteOpenAPI}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.cors.on && g.cors.handle(g, w, r, tl, methodsGet) {
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			g.fail(w, r, tl, http.StatusMethodNotAllowed, &handler.Error{Code: proto.CodeUnimplemented, Unprocessed: true,
				Message: "method " + r.Method + ": the OpenAPI document is read with GET"})
			return
		}
		if _, err := g.authenticate(r); err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="rpcd"`)
			g.fail(w, r, tl, 0, err)
			return
		}
		doc := g.OpenAPIDocument(opts)
		h := w.Header()
		h["Content-Type"] = contentJSONValue
		h.Set("Cache-Control", "no-cache")
		g.counts.response(RouteOpenAPI, http.StatusOK)
		writeBody(w, r, http.StatusOK, doc, g.opts.CompressMin)
	})
}

// obj is a JSON object of the document.
type obj = map[string]any

// OpenAPIDocument returns the OpenAPI 3.1 document of the gateway's
// routes, as JSON: a path POST PREFIX+ROUTE for each call route (stream
// routes are not called over HTTP), a typed route's body and 200 reply in
// application/json with its argument's and reply's JSON Schemas (from
// schema.Descriptions), a raw route's in application/octet-stream
// or application/json, any bytes; each error status with the error body
// {"code", "message", "unprocessed"}; the Rpcd-Timeout, traceparent,
// tracestate and baggage headers as optional parameters; with an
// Authenticator, a bearer security scheme that every operation requires;
// and the JSON-RPC path, if opts names it. docs/gateway.md, "OpenAPI".
func (g *Gateway) OpenAPIDocument(opts OpenAPIOptions) []byte {
	if opts.Title == "" {
		opts.Title = "rpcd"
	}
	if opts.Version == "" {
		opts.Version = "1"
	}
	auth := g.opts.Authenticator != nil
	hoist := &hoister{components: map[string]*schema.Schema{}, byKey: map[string]map[string]string{}}

	params := []any{ref("parameters", "Rpcd-Timeout"), ref("parameters", "traceparent"), ref("parameters", "tracestate"), ref("parameters", "baggage")}
	if auth {
		params = append(params, ref("parameters", "Rpcd-Auth-Method"))
	}
	errResponses := func(statuses []int) obj {
		out := obj{}
		for _, s := range statuses {
			out[strconv.Itoa(s)] = ref("responses", errorName(s))
		}
		return out
	}
	var allStatuses []int
	for _, e := range errorStatuses {
		allStatuses = append(allStatuses, e.status)
	}

	paths := obj{}
	var methods []string
	for _, d := range schema.Descriptions(g.reg) {
		if d.Kind == schema.KindStream {
			continue
		}
		methods = append(methods, d.Name)
		var body, reply obj
		summary := d.Kind + " route " + d.Name
		if d.Kind == schema.KindTyped {
			body = obj{ContentJSON: obj{"schema": hoist.schema(d.Argument)}}
			reply = obj{ContentJSON: obj{"schema": hoist.schema(d.Reply)}}
		} else {
			body = obj{ContentRaw: obj{}, ContentJSON: obj{}}
			reply = obj{ContentRaw: obj{}, ContentJSON: obj{}}
		}
		responses := errResponses(allStatuses)
		responses["200"] = obj{"description": "the route's reply", "content": reply}
		tag, _, _ := strings.Cut(d.Name, "/")
		paths[g.opts.Prefix+escapeRoute(d.Name)] = obj{"post": obj{
			"operationId": d.Name,
			"summary":     summary,
			"description": routeText(d),
			"tags":        []string{tag},
			"parameters":  params,
			"requestBody": obj{"required": false, "content": body},
			"responses":   responses,
			"x-rpcd-kind": d.Kind,
		}}
	}
	if opts.JSONRPCPath != "" {
		responses := errResponses(jsonrpcStatuses)
		responses["200"] = obj{"description": "the response objects of the requests that are not notifications: one, or an array for a batch",
			"content": obj{ContentJSON: obj{"schema": obj{"anyOf": []any{ref("schemas", oaJSONRPCResponse),
				obj{"type": "array", "items": ref("schemas", oaJSONRPCResponse)}}}}}}
		responses["204"] = obj{"description": "notifications only: no response"}
		paths[opts.JSONRPCPath] = obj{"post": obj{
			"operationId": "jsonrpc",
			"summary":     "JSON-RPC 2.0: the method is the route, the params its argument",
			"description": "A request object, or a batch of them, each calling a route (docs/gateway.md, \"JSON-RPC 2.0\"). A call's error is in its response object, with rpcd's code in its data; the statuses below are the request's, before any call.",
			"tags":        []string{"JSON-RPC"},
			"parameters":  params,
			"requestBody": obj{"required": true, "content": obj{ContentJSON: obj{"schema": obj{"anyOf": []any{ref("schemas", oaJSONRPCRequest),
				obj{"type": "array", "items": ref("schemas", oaJSONRPCRequest), "minItems": 1}}}}}},
			"responses": responses,
		}}
	}

	schemas := obj{
		oaError: obj{"type": "object", "required": []string{"code", "message"}, "properties": obj{
			"code":        obj{"type": "string", "pattern": `^([A-Z][A-Za-z]*|Code\([0-9]+\))$`, "description": "the rpcd code's name: NotFound, InvalidArgument, ... (Code(N) for a code rpcd does not know)"},
			"message":     obj{"type": "string"},
			"unprocessed": obj{"type": "boolean", "description": "the call was not acted on: sending it again is safe"},
		}},
	}
	if opts.JSONRPCPath != "" {
		sort.Strings(methods)
		id := obj{"type": []string{"string", "number", "null"}}
		method := obj{"type": "string", "description": "the route"}
		if len(methods) > 0 {
			method["enum"] = methods // a registry with no call route has none: an empty enum is no schema
		}
		schemas[oaJSONRPCRequest] = obj{"type": "object", "required": []string{"jsonrpc", "method"}, "properties": obj{
			"jsonrpc": obj{"const": "2.0"},
			"method":  method,
			"params": obj{"description": "the argument (an object of any fields), or an array holding it",
				"anyOf": []any{obj{"type": "object", "additionalProperties": obj{}}, obj{"type": "array"}, obj{"type": "null"}}},
			"id": obj{"type": []string{"string", "number", "null"}, "description": "absent in a notification"},
		}}
		schemas[oaJSONRPCResponse] = obj{"type": "object", "required": []string{"jsonrpc", "id"}, "properties": obj{
			"jsonrpc": obj{"const": "2.0"},
			"result":  obj{"description": "the route's reply"},
			"error":   ref("schemas", oaJSONRPCError),
			"id":      id,
		}}
		schemas[oaJSONRPCError] = obj{"type": "object", "required": []string{"code", "message"}, "properties": obj{
			"code":    obj{"type": "integer", "description": "-32700 parse error, -32600 invalid request, -32601 no such route, -32602 invalid params, -32603 internal, -32000 any other error of a call"},
			"message": obj{"type": "string"},
			"data": obj{"type": "object", "required": []string{"code", "name"}, "properties": obj{
				"code":        obj{"type": "integer", "description": "the rpcd code"},
				"name":        obj{"type": "string"},
				"unprocessed": obj{"type": "boolean"},
			}},
		}}
	}
	for name, s := range hoist.components {
		schemas[name] = s
	}

	responses := obj{}
	for _, e := range errorStatuses {
		r := obj{"description": e.what, "content": obj{ContentJSON: obj{"schema": ref("schemas", oaError)}}}
		if e.status == 401 {
			r["headers"] = obj{"WWW-Authenticate": obj{"description": `Bearer realm="rpcd"`, "schema": obj{"type": "string"}}}
		}
		responses[errorName(e.status)] = r
	}
	header := func(name, desc string) obj {
		return obj{"name": name, "in": "header", "required": false, "description": desc, "schema": obj{"type": "string"}}
	}
	components := obj{
		"schemas":   schemas,
		"responses": responses,
		"parameters": obj{
			"Rpcd-Timeout":     header(HeaderTimeout, "the call's deadline, a Go duration such as 250ms; the request's own deadline, if earlier, wins"),
			"traceparent":      header("traceparent", "W3C Trace Context: the call's metadata traceparent"),
			"tracestate":       header("tracestate", "W3C Trace Context: the call's metadata tracestate"),
			"baggage":          header("baggage", "W3C Baggage: the call's metadata baggage (repeated headers joined with commas)"),
			"Rpcd-Auth-Method": header(HeaderAuthMethod, "the bearer token's kind for the server's Authenticator (token, hmac); without it the Authenticator tries what it has"),
		},
	}
	doc := obj{
		"openapi": "3.1.0",
		"info": obj{"title": opts.Title, "version": opts.Version, "description": "rpcd's routes over HTTP (docs/gateway.md): " +
			"POST " + g.opts.Prefix + "ROUTE with the argument as the body calls the route and answers its reply. " +
			"Besides the parameters below, each header " + HeaderMetaPrefix + "KEY becomes the call's metadata entry key (lower case; repeated headers give repeated entries; keys beginning rpcd- are refused). " +
			"A body in Content-Encoding zstd or gzip is expanded; a reply of 1 KiB or more is compressed as Accept-Encoding asks."},
		"paths":      paths,
		"components": components,
	}
	if auth {
		components["securitySchemes"] = obj{oaBearer: obj{"type": "http", "scheme": "bearer",
			"description": "a token the server's Authenticator takes (-auth-tokens, -auth-hmac-key); per request"}}
		doc["security"] = []any{obj{oaBearer: []string{}}}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic("rpcd: gateway: the OpenAPI document does not encode: " + err.Error()) // its parts all do
	}
	return b
}

// ref is a reference to the component name of a kind ("schemas").
func ref(kind, name string) obj { return obj{"$ref": "#/components/" + kind + "/" + name} }

// errorName is the component name of the error response with status.
func errorName(status int) string { return "Error" + strconv.Itoa(status) }

// routeText describes a route for people.
func routeText(d schema.Description) string {
	var b strings.Builder
	switch d.Kind {
	case schema.KindTyped:
		b.WriteString("A typed route: the body is its argument in JSON (an empty body is the zero value), the reply its result in JSON.")
	default:
		b.WriteString("A raw route: the body is its payload, any bytes, sent as application/octet-stream (or as application/json); the reply is its bytes, in the request's Content-Type.")
	}
	if d.Blocking {
		b.WriteString(" It may block (it runs on the server's blocking pool).")
	}
	return b.String()
}

// escapeRoute escapes a route for a path: each segment between slashes
// percent-encoded where a path needs it (and for '{' and '}', which
// OpenAPI reads as a template).
func escapeRoute(route string) string {
	segs := strings.Split(route, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// hoister moves the $defs of the routes' schemas, which only recursive
// types have, to the document's components, and points their $refs
// there: in an OpenAPI document, "#/$defs/..." would name the document's
// root.
type hoister struct {
	components map[string]*schema.Schema
	byKey      map[string]map[string]string // a schema's $defs, as JSON → its names → their component names
}

// schema returns s as the document holds it: s itself if it has no $defs
// and no object left open (it is shared, and not changed), else a copy
// whose $refs point to components and whose open objects say so.
func (h *hoister) schema(s *schema.Schema) *schema.Schema {
	if s == nil {
		return nil
	}
	if len(s.Defs) == 0 {
		if !hasOpenObject(s) {
			return s
		}
		return closeOpen(copySchema(s))
	}
	key, _ := json.Marshal(s.Defs)
	names, ok := h.byKey[string(key)]
	if !ok {
		locals := make([]string, 0, len(s.Defs))
		for name := range s.Defs {
			locals = append(locals, name)
		}
		sort.Strings(locals)
		names = map[string]string{}
		for _, local := range locals {
			name := local
			for i := 2; h.components[name] != nil; i++ {
				name = local + "_" + strconv.Itoa(i)
			}
			names[local] = name
			h.components[name] = &schema.Schema{} // taken; filled below
		}
		for _, local := range locals {
			h.components[names[local]] = closeOpen(repoint(copySchema(s.Defs[local]), names))
		}
		h.byKey[string(key)] = names
	}
	c := copySchema(s)
	c.Defs = nil
	return closeOpen(repoint(c, names))
}

// An open object is a schema of type object with neither properties nor
// additionalProperties: any object, as JSON Schema reads it (a value whose
// type describes itself as an object, schema.Schema in Sys/Describe's
// reply; a struct with no fields, whose decoding ignores every field). A
// generator need not read it so: openapi-typescript, by default, makes it
// Record<string, never>, an object with no fields, which no argument of
// Sys/Describe's sort fits. So the document says additionalProperties: {}
// (any fields), and generators read what the server does.

// hasOpenObject reports whether s or a schema within it is an open object.
func hasOpenObject(s *schema.Schema) bool {
	if s == nil {
		return false
	}
	if isOpen(s) || hasOpenObject(s.Items) || hasOpenObject(s.AdditionalProperties) {
		return true
	}
	for _, p := range s.Properties {
		if hasOpenObject(p.Schema) {
			return true
		}
	}
	for _, a := range s.AnyOf {
		if hasOpenObject(a) {
			return true
		}
	}
	for _, d := range s.Defs {
		if hasOpenObject(d) {
			return true
		}
	}
	return false
}

func isOpen(s *schema.Schema) bool {
	return slices.Contains(s.Type, "object") && len(s.Properties) == 0 && s.AdditionalProperties == nil && s.Ref == ""
}

// closeOpen gives every open object in s, a copy, additionalProperties: {}.
func closeOpen(s *schema.Schema) *schema.Schema {
	if s == nil {
		return nil
	}
	if isOpen(s) {
		s.AdditionalProperties = &schema.Schema{}
	}
	closeOpen(s.Items)
	closeOpen(s.AdditionalProperties)
	for _, p := range s.Properties {
		closeOpen(p.Schema)
	}
	for _, a := range s.AnyOf {
		closeOpen(a)
	}
	for _, d := range s.Defs {
		closeOpen(d)
	}
	return s
}

// copySchema returns a deep copy of s.
func copySchema(s *schema.Schema) *schema.Schema {
	b, err := json.Marshal(s)
	var c schema.Schema
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		panic("rpcd: gateway: a schema does not copy: " + err.Error()) // what Schema encodes, it decodes
	}
	return &c
}

// repoint points the $refs of s, a copy, to the components names gives.
func repoint(s *schema.Schema, names map[string]string) *schema.Schema {
	if s == nil {
		return nil
	}
	if local, ok := strings.CutPrefix(s.Ref, "#/$defs/"); ok && names[local] != "" {
		s.Ref = "#/components/schemas/" + names[local]
	}
	repoint(s.Items, names)
	repoint(s.AdditionalProperties, names)
	for _, p := range s.Properties {
		repoint(p.Schema, names)
	}
	for _, a := range s.AnyOf {
		repoint(a, names)
	}
	return s
}
