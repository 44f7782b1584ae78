package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/proto"
)

// JSON-RPC 2.0 (https://www.jsonrpc.org/specification) over HTTP, so that
// the tools and libraries that speak it call rpcd's routes: POST a request
// object, or a batch of them, to the gateway's JSON-RPC path; the method
// is the route, the params its argument. docs/gateway.md, "JSON-RPC 2.0".

// JSONRPCPath is where `rpcd serve -gateway` serves JSON-RPC.
const JSONRPCPath = "/jsonrpc"

// The error codes JSON-RPC defines, and the one rpcd uses for every other
// error of a call (one of the "server error" codes the specification
// leaves to implementations); the error's data holds rpcd's own code.
const (
	JSONRPCParseError     = -32700
	JSONRPCInvalidRequest = -32600
	JSONRPCMethodNotFound = -32601
	JSONRPCInvalidParams  = -32602
	JSONRPCInternalError  = -32603
	JSONRPCServerError    = -32000
)

// jsonrpcRequest is a request object as it is read.
type jsonrpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
	ID      json.RawMessage `json:"id"` // absent: a notification
}

// jsonrpcResponse is a response object.
type jsonrpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *jsonrpcError   `json:"error,omitempty"`
	ID      json.RawMessage `json:"id"`
}

// jsonrpcError is a response's error object.
type jsonrpcError struct {
	Code    int          `json:"code"`
	Message string       `json:"message"`
	Data    *jsonrpcRPCD `json:"data,omitempty"`
}

// jsonrpcRPCD is the data of an error that came from a call: rpcd's code
// (a number and its name, as protocol.md's table has them) and whether
// the call is known not to have run.
type jsonrpcRPCD struct {
	Code        int    `json:"code"`
	Name        string `json:"name"`
	Unprocessed bool   `json:"unprocessed,omitempty"`
}

var jsonNull = json.RawMessage("null")

// JSONRPC returns the gateway's JSON-RPC 2.0 handler: a POST of one
// request object, or of a batch (an array of them), calls each method as
// a route with its params as the argument, in order, and answers with
// the response objects (none for notifications: 204 then). It
// authenticates, takes metadata and a deadline from the headers, and
// refuses while draining, as the gateway's other calls. Its responses are
// counted in Stats under RouteJSONRPC, and each call answered with an
// error by its code.
func (g *Gateway) JSONRPC() http.Handler {
	return http.HandlerFunc(g.serveJSONRPC)
}

func (g *Gateway) serveJSONRPC(w http.ResponseWriter, r *http.Request) {
	tl := tally{route: RouteJSONRPC, call: true} // a request refused whole counts as one call
	if g.cors.on && g.cors.handle(g, w, r, tl, methodsPost) {
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		g.fail(w, r, tl, http.StatusMethodNotAllowed, &handler.Error{Code: proto.CodeUnimplemented, Unprocessed: true,
			Message: "method " + r.Method + ": JSON-RPC requests are POSTed"})
		return
	}
	if codec, err := codecOf(r.Header.Get("Content-Type")); err != nil || codec != proto.CodecJSON {
		g.fail(w, r, tl, http.StatusUnsupportedMediaType, &handler.Error{Code: proto.CodeInvalidArgument, Unprocessed: true,
			Message: "Content-Type " + r.Header.Get("Content-Type") + ": JSON-RPC takes " + ContentJSON})
		return
	}
	zip, ok := g.bodyCoding(w, r, tl)
	if !ok {
		return
	}
	id, ok := g.admit(w, r, tl)
	if !ok {
		return
	}
	md, deadline, ok := g.callHeaders(w, r, tl)
	if !ok {
		return
	}
	in, ok := g.readBody(w, r, tl, zip, g.opts.Limits.MaxFrameSize, "the frame limit")
	defer in.release()
	if !ok {
		return
	}
	body := in.b
	c := jsonrpcCall{g: g, r: r, id: id, md: md, deadline: deadline}
	var out []byte
	switch trimmed := bytes.TrimLeft(body, " \t\r\n"); {
	case !json.Valid(body):
		g.counts.failed(proto.CodeInvalidArgument)
		out = mustJSON(jsonrpcResponse{JSONRPC: "2.0", ID: jsonNull, Error: refused(JSONRPCParseError, "parse error: the body is not JSON")})
	case len(trimmed) > 0 && trimmed[0] == '[':
		var batch []json.RawMessage
		_ = json.Unmarshal(body, &batch)
		if len(batch) == 0 {
			g.counts.failed(proto.CodeInvalidArgument)
			out = mustJSON(jsonrpcResponse{JSONRPC: "2.0", ID: jsonNull, Error: refused(JSONRPCInvalidRequest, "invalid request: an empty batch")})
			break
		}
		// The responses are encoded as they come, within the frame limit:
		// past it the request fails whole, and the calls after are not run.
		for i, one := range batch {
			resp, ok := c.run(one)
			if !ok {
				continue
			}
			out = append(append(out, ','), mustJSON(resp)...)
			if len(out) > g.opts.Limits.MaxFrameSize {
				g.fail(w, r, tl, http.StatusTooManyRequests, &handler.Error{Code: proto.CodeResourceExhausted,
					Message: fmt.Sprintf("the batch's responses pass the frame limit of %d bytes at its call %d of %d: those before it ran, those after did not", g.opts.Limits.MaxFrameSize, i+1, len(batch))})
				return
			}
		}
		if len(out) > 0 {
			out[0] = '['
			out = append(out, ']')
		}
	default:
		if resp, ok := c.run(body); ok {
			out = mustJSON(resp)
		}
	}
	if out == nil { // notifications only
		g.counts.response(RouteJSONRPC, http.StatusNoContent)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header()["Content-Type"] = contentJSONValue
	g.counts.response(RouteJSONRPC, http.StatusOK)
	writeBody(w, r, http.StatusOK, append(out, '\n'), g.opts.CompressMin)
}

// jsonrpcCall is what the calls of one JSON-RPC request share.
type jsonrpcCall struct {
	g        *Gateway
	r        *http.Request
	id       *handler.Identity
	md       proto.Metadata
	deadline time.Time
}

// run runs one request object and returns its response, or false for a
// notification (which gets none, whatever becomes of it). A response
// with an error is counted in Stats.Errors.
func (c *jsonrpcCall) run(raw json.RawMessage) (jsonrpcResponse, bool) {
	resp, ok := c.runOne(raw)
	if ok && resp.Error != nil {
		code := proto.CodeInvalidArgument // JSON-RPC's own errors: no request object, params that are not the argument
		if resp.Error.Data != nil {
			code = proto.Code(resp.Error.Data.Code)
		}
		c.g.counts.failed(code)
	}
	return resp, ok
}

// runOne is run, uncounted.
func (c *jsonrpcCall) runOne(raw json.RawMessage) (jsonrpcResponse, bool) {
	resp := jsonrpcResponse{JSONRPC: "2.0", ID: jsonNull}
	var req jsonrpcRequest
	if err := json.Unmarshal(raw, &req); err != nil || req.JSONRPC != "2.0" || req.Method == nil || !validID(req.ID) {
		resp.Error = refused(JSONRPCInvalidRequest, "invalid request: want an object with \"jsonrpc\": \"2.0\", a string \"method\", and an \"id\" that is a string, a number or null if any")
		if err == nil && validID(req.ID) && req.ID != nil {
			resp.ID = req.ID
		}
		return resp, true
	}
	notify := req.ID == nil
	if !notify {
		resp.ID = req.ID
	}
	arg, err := paramsArg(req.Params)
	if err != nil {
		resp.Error = errorObject(err) // invalid params, with rpcd's code in data
		return resp, !notify
	}
	result, err := c.call(*req.Method, arg)
	if err != nil {
		resp.Error = errorObject(err)
	} else {
		resp.Result = result
	}
	return resp, !notify
}

// call calls route with the JSON argument arg and returns its reply, which
// must be JSON.
func (c *jsonrpcCall) call(route string, arg []byte) (json.RawMessage, error) {
	g := c.g
	if g.draining.Load() {
		return nil, &handler.Error{Code: proto.CodeUnavailable, Message: "server is draining", Unprocessed: true}
	}
	rt := g.reg.Lookup([]byte(route))
	if rt == nil || handler.ValidRoute(route) != nil || len(route) > g.opts.Limits.MaxRoute {
		return nil, &handler.Error{Code: proto.CodeNotFound, Message: "no route " + route, Unprocessed: true}
	}
	if n := proto.HeaderSize + len(route) + len(c.md) + len(arg); n > g.opts.Limits.MaxFrameSize {
		return nil, &handler.Error{Code: proto.CodeResourceExhausted, Unprocessed: true,
			Message: "call of " + strconv.Itoa(n) + " bytes exceeds the frame limit of " + strconv.Itoa(g.opts.Limits.MaxFrameSize)}
	}
	out, err := g.runCall(c.r, rt, proto.CodecJSON, c.md, c.id, c.deadline, arg, nil)
	switch {
	case err != nil:
		return nil, err
	case len(out) == 0:
		return jsonNull, nil // a raw route that answered nothing
	case !json.Valid(out):
		return nil, &handler.Error{Code: proto.CodeInternal, Message: "the reply of " + route + " is not JSON: call it at " + g.opts.Prefix + route + " instead"}
	}
	return out, nil
}

// paramsArg turns a request's params into the route's argument: an object
// is the argument; an array must hold exactly one value, the argument
// (JSON-RPC's params are structured, and a route takes one argument);
// none is no argument.
func paramsArg(params json.RawMessage) ([]byte, error) {
	p := bytes.TrimSpace(params)
	switch {
	case len(p) == 0 || bytes.Equal(p, jsonNull):
		return nil, nil
	case p[0] == '{':
		return p, nil
	case p[0] == '[':
		var one []json.RawMessage
		if err := json.Unmarshal(p, &one); err != nil || len(one) != 1 {
			return nil, &handler.Error{Code: proto.CodeInvalidArgument, Message: "invalid params: by position, give the route's one argument: [ARG]", Unprocessed: true}
		}
		return one[0], nil
	}
	return nil, &handler.Error{Code: proto.CodeInvalidArgument, Message: "invalid params: want an object, or an array holding the argument", Unprocessed: true}
}

// refused is the error object of a request refused before any call (not
// JSON, not a request object): JSON-RPC's code, with rpcd's
// InvalidArgument, unprocessed, in data as for every error.
func refused(code int, msg string) *jsonrpcError {
	return &jsonrpcError{Code: code, Message: msg,
		Data: &jsonrpcRPCD{Code: int(proto.CodeInvalidArgument), Name: CodeName(proto.CodeInvalidArgument), Unprocessed: true}}
}

// errorObject is the error object of a call's error: JSON-RPC's own code
// where one fits (no such route: method not found; arguments that do not
// decode: invalid params), else the server error, with rpcd's code in
// data.
func errorObject(err error) *jsonrpcError {
	code := handler.CodeOf(err)
	e := &jsonrpcError{Code: JSONRPCServerError, Message: handler.MessageOf(err),
		Data: &jsonrpcRPCD{Code: int(code), Name: CodeName(code), Unprocessed: transport.AnswersUnprocessed(err)}}
	switch {
	case code == proto.CodeNotFound && transport.AnswersUnprocessed(err):
		e.Code = JSONRPCMethodNotFound
	case code == proto.CodeInvalidArgument && transport.AnswersUnprocessed(err):
		e.Code = JSONRPCInvalidParams
	case code == proto.CodeInternal:
		e.Code = JSONRPCInternalError
	}
	return e
}

// validID reports whether id is absent or a string, a number or null.
func validID(id json.RawMessage) bool {
	if id == nil {
		return true
	}
	switch id[0] {
	case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// mustJSON encodes v, which always encodes.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
