// Package gateway serves a handler.Registry over HTTP/1.1 and HTTP/2 with
// JSON bodies, for tools that do not speak rpcd's protocol: curl, a
// browser, a load balancer's health check.
//
//	POST /rpc/Math/Sum
//	Content-Type: application/json
//
//	{"a":1,"b":2}
//
// is answered 200 with the body 3. The Gateway is an http.Handler: it
// looks the route up in the same registry the reactor serves, runs it
// through the same middleware (authorization, tracing, metrics) with a
// handler.Call of its own, and writes the handler's reply as the response
// body. Errors are JSON, {"code":"NotFound","message":"no route No/Such"},
// with the HTTP status that stands for the rpcd code (HTTPStatus).
//
// Request headers map to the call: traceparent, tracestate and baggage to
// the metadata keys of the same names (repeated baggage headers joined
// with commas into one entry), each Rpcd-Meta-Key header to the
// metadata key "key", Rpcd-Timeout (a Go duration such as "250ms") and the
// request context's deadline to the call's deadline, and the request
// context's end (the client went away) cancels the call. A body is bounded
// by the frame limit, as a frame would be. A raw route is called with a
// body of Content-Type application/octet-stream, and answers in kind.
//
// With Options.Authenticator set, every request must carry
// "Authorization: Bearer TOKEN", checked by that Authenticator as a Hello's
// credentials are; the identity it returns goes with the call, so the
// registry's authorization middleware applies as it does to rpcd
// connections. Served over TLS with client certificates, a verified
// certificate gives the identity instead, as on the reactor.
//
// OpenAPI serves an OpenAPI 3.1 document of the routes (OpenAPIPath,
// /openapi.json): each call route's path, a typed route's argument and reply
// as the JSON Schemas package handler/schema derives from its Go types,
// the error statuses with the error body, the headers, and a bearer scheme
// with an Authenticator.
//
// Every endpoint follows the same HTTP rules: a request body in
// Content-Encoding zstd or gzip is expanded, any other coding refused with
// 415; a reply of Options.CompressMin bytes or more (1 KiB) is compressed
// as Accept-Encoding asks (Write gives the rule to other handlers). With
// Options.CORS listing origins, pages of those origins may call from a
// browser: preflights are answered, replies carry
// Access-Control-Allow-Origin, and CORS.CheckOrigin is the same policy for
// a WebSocket upgrade.
//
// docs/gateway.md has the status table, the headers, and why rpcd serve
// runs the gateway on a port of its own (-gateway) rather than on the
// main port, with the measurements behind that.
package gateway
