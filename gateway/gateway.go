package gateway

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/proto"
)

// Header names the gateway reads.
const (
	// HeaderTimeout gives the call a deadline, as a Go duration ("250ms").
	HeaderTimeout = "Rpcd-Timeout"
	// HeaderMetaPrefix begins the headers that become metadata: the rest
	// of the name, in lower case, is the key (Rpcd-Meta-Tenant: acme gives
	// tenant=acme).
	HeaderMetaPrefix = "Rpcd-Meta-"
	// HeaderAuthMethod names the kind of the bearer token for the
	// Authenticator ("token", "hmac"), as a Hello's rpcd-auth-method does;
	// without it the Authenticator tries what it has.
	HeaderAuthMethod = "Rpcd-Auth-Method"
)

// Content types of request and response bodies.
const (
	ContentJSON = "application/json"         // codec JSON: typed routes
	ContentRaw  = "application/octet-stream" // codec raw: raw routes
)

// DefaultPrefix is the path under which routes are served: POST
// /rpc/Controller/Action.
const DefaultPrefix = "/rpc/"

// Options configures a Gateway. The zero Options is valid.
type Options struct {
	// Limits bounds what a request may carry, as for a frame: the route
	// (default 256 bytes), the metadata the headers make (8 KiB), and the
	// route, metadata and body together with a frame header (4 MiB); a
	// reply past the frame limit fails with ResourceExhausted. Give the
	// reactor's limits to keep both transports alike.
	Limits proto.Limits

	// Authenticator, if set, makes every request authenticate with
	// "Authorization: Bearer TOKEN"; it is asked as for a Hello (method
	// from the Rpcd-Auth-Method header, credentials the token), per
	// request. Requests without valid credentials get 401.
	Authenticator handler.Authenticator

	// Prefix is the path routes are served under; default DefaultPrefix.
	Prefix string

	// BaseContext, if set, supplies the values every Call carries.
	BaseContext context.Context

	// Logger receives the gateway's logs (a handler's panic); default
	// slog.Default().
	Logger *slog.Logger

	// CompressMin is the smallest reply body, in bytes, compressed for a
	// client whose Accept-Encoding takes zstd or gzip (when compressing
	// makes it smaller), on every endpoint: calls, JSON-RPC, the OpenAPI
	// document, error bodies; 0 means DefaultCompressMin (1 KiB), negative
	// sends every reply as it is. Request bodies in Content-Encoding zstd
	// or gzip are expanded whatever it is.
	CompressMin int

	// CORS says which pages of other origins may call the gateway from a
	// browser; the zero CORS lets none (no CORS headers, and OPTIONS is
	// 405).
	CORS CORS
}

// Gateway is an http.Handler that calls a registry's routes. It is safe
// for concurrent use.
type Gateway struct {
	reg      *handler.Registry
	opts     Options
	log      *slog.Logger
	run      transport.Runner // runs the calls (handler/transport/run.go)
	ids      atomic.Uint32
	draining atomic.Bool
	counts   counters // Stats
	cors     corsPolicy
}

// New returns a gateway to reg's routes.
func New(reg *handler.Registry, opts Options) *Gateway {
	opts.Limits = opts.Limits.WithDefaults()
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.BaseContext == nil {
		opts.BaseContext = context.Background()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.CompressMin == 0 {
		opts.CompressMin = DefaultCompressMin
	}
	return &Gateway{reg: reg, opts: opts, log: opts.Logger, cors: newCORSPolicy(opts.CORS),
		run: transport.Runner{MaxFrame: opts.Limits.MaxFrameSize, Logger: opts.Logger}}
}

// Drain makes the gateway refuse new calls with Unavailable (503), marked
// unprocessed, as a draining reactor does; calls already running finish.
// A server shutting down calls it before http.Server.Shutdown, which waits
// for them.
func (g *Gateway) Drain() { g.draining.Store(true) }

// errorBody is the JSON body of a failed call.
type errorBody struct {
	Code        string `json:"code"`
	Message     string `json:"message"`
	Unprocessed bool   `json:"unprocessed,omitempty"`
}

// bufPool holds request and reply buffers.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// maxPooled is the largest buffer kept for reuse.
const maxPooled = 256 << 10

// ServeHTTP calls the route the path names with the request body. Every
// response is counted in Stats, by the route's name (RouteUnknown for a
// path that names no route) and status, and a call's error by its code.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	route, ok := strings.CutPrefix(r.URL.Path, g.opts.Prefix)
	if !ok {
		g.fail(w, r, tally{route: RouteUnknown}, http.StatusNotFound, &handler.Error{Code: proto.CodeNotFound, Unprocessed: true,
			Message: "no route: paths are " + g.opts.Prefix + "Controller/Action"})
		return
	}
	rt := g.reg.Lookup([]byte(route))
	tl := tally{route: RouteUnknown, call: true}
	if rt != nil {
		tl.route = rt.Name()
	}
	if g.cors.on && g.cors.handle(g, w, r, tl, methodsPost) {
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		g.fail(w, r, tl, http.StatusMethodNotAllowed, &handler.Error{Code: proto.CodeUnimplemented, Unprocessed: true,
			Message: "method " + r.Method + ": routes are called with POST"})
		return
	}
	codec, err := codecOf(r.Header.Get("Content-Type"))
	if err != nil {
		g.fail(w, r, tl, http.StatusUnsupportedMediaType, err)
		return
	}
	zip, ok := g.bodyCoding(w, r, tl)
	if !ok {
		return
	}
	if g.draining.Load() {
		g.fail(w, r, tl, 0, &handler.Error{Code: proto.CodeUnavailable, Message: "server is draining", Unprocessed: true})
		return
	}
	id, ok := g.admit(w, r, tl)
	if !ok {
		return
	}
	if rt == nil || handler.ValidRoute(route) != nil || len(route) > g.opts.Limits.MaxRoute {
		g.fail(w, r, tl, 0, &handler.Error{Code: proto.CodeNotFound, Message: "no route " + route, Unprocessed: true})
		return
	}
	md, deadline, ok := g.callHeaders(w, r, tl)
	if !ok {
		return
	}

	limit := g.opts.Limits.MaxFrameSize - proto.HeaderSize - len(route) - len(md)
	in, ok := g.readBody(w, r, tl, zip, limit, "the frame limit, less the route and metadata")
	defer in.release()
	if !ok {
		return
	}

	rp := bufPool.Get().(*[]byte)
	out, err := g.runCall(r, rt, codec, md, id, deadline, in.b, (*rp)[:0])
	defer func() {
		if cap(out) <= maxPooled {
			*rp = out[:0]
			bufPool.Put(rp)
		}
	}()
	if err != nil {
		g.fail(w, r, tl, 0, err)
		return
	}
	if codec == proto.CodecRaw {
		w.Header()["Content-Type"] = contentRawValue
	} else {
		w.Header()["Content-Type"] = contentJSONValue
	}
	g.counts.response(tl.route, http.StatusOK)
	writeBody(w, r, http.StatusOK, out, g.opts.CompressMin)
}

// runCall runs rt with the argument arg under a Call made from r and the
// rest, its reply appended to out: the request's end (the client went
// away) cancels the call, watched only once the handler asks
// (transport.CancelWhen).
func (g *Gateway) runCall(r *http.Request, rt *handler.Route, codec proto.Codec, md proto.Metadata, id *handler.Identity, deadline time.Time, arg, out []byte) ([]byte, error) {
	call := callPool.Get().(*handler.Call)
	call.Route, call.ID, call.Codec, call.Metadata = rt.Name(), g.ids.Add(1), codec, md
	call.Remote, call.Identity = remoteAddr(r.RemoteAddr), id
	call.Start(g.opts.BaseContext, deadline)
	transport.CancelWhen(call, r.Context())
	out, err := g.run.Outcome(rt, call, arg, out)
	if call.End() {
		call.Remote, call.Identity = nil, nil
		callPool.Put(call)
	}
	return out, err
}

// callPool holds Calls for the next request, each put back only while no
// context derived from it outlives its handler (Call.End).
var callPool = sync.Pool{New: func() any { return new(handler.Call) }}

// fail writes err as a JSON error body, with status, or the status that
// stands for err's code when status is 0, having counted it as tl says.
func (g *Gateway) fail(w http.ResponseWriter, r *http.Request, tl tally, status int, err error) {
	code := handler.CodeOf(err)
	if status == 0 {
		status = HTTPStatus(code)
	}
	g.counts.response(tl.route, status)
	if tl.call {
		g.counts.failed(code)
	}
	body, _ := json.Marshal(errorBody{Code: CodeName(code), Message: handler.MessageOf(err), Unprocessed: transport.AnswersUnprocessed(err)})
	h := w.Header()
	h["Content-Type"] = contentJSONValue
	h["X-Content-Type-Options"] = nosniffValue
	writeBody(w, r, status, append(body, '\n'), g.opts.CompressMin)
}

// Header values the gateway sets on every reply, shared rather than
// allocated per reply: assigned to the map whole, as canonical keys, they
// are never written through (Header.Add appends to a full slice, so copies).
var (
	contentJSONValue = []string{ContentJSON}
	contentRawValue  = []string{ContentRaw}
	varyValue        = []string{"Accept-Encoding"}
	varyOriginValue  = []string{"Origin"}
	varyBothValue    = []string{"Origin, Accept-Encoding"}
	nosniffValue     = []string{"nosniff"}
)

// codecOf returns the codec a Content-Type asks for: JSON for
// application/json or none, raw for application/octet-stream.
func codecOf(contentType string) (proto.Codec, error) {
	switch contentType { // the common spellings, without parsing
	case "", ContentJSON:
		return proto.CodecJSON, nil
	case ContentRaw:
		return proto.CodecRaw, nil
	}
	mt, _, err := mime.ParseMediaType(contentType)
	switch {
	case err != nil:
	case mt == ContentJSON:
		return proto.CodecJSON, nil
	case mt == ContentRaw:
		return proto.CodecRaw, nil
	}
	return 0, &handler.Error{Code: proto.CodeInvalidArgument, Unprocessed: true,
		Message: "Content-Type " + contentType + ": want " + ContentJSON + " or, for raw routes, " + ContentRaw}
}

// admit authenticates r; if that fails it answers with the error and the
// Bearer challenge, and reports false.
func (g *Gateway) admit(w http.ResponseWriter, r *http.Request, tl tally) (*handler.Identity, bool) {
	id, err := g.authenticate(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="rpcd"`)
		g.fail(w, r, tl, 0, err)
		return nil, false
	}
	return id, true
}

// callHeaders reads a call's metadata and deadline from r's headers; if
// either is bad it answers with the error and reports false.
func (g *Gateway) callHeaders(w http.ResponseWriter, r *http.Request, tl tally) (proto.Metadata, time.Time, bool) {
	md, status, err := g.metadata(r.Header)
	if err != nil {
		g.fail(w, r, tl, status, err)
		return nil, time.Time{}, false
	}
	deadline, err := deadlineOf(r)
	if err != nil {
		g.fail(w, r, tl, 0, err)
		return nil, time.Time{}, false
	}
	return md, deadline, true
}

// authenticate returns the identity the request acts as: the
// Authenticator's verdict on its bearer token when one is set, else a
// verified client certificate's, else none.
func (g *Gateway) authenticate(r *http.Request) (*handler.Identity, error) {
	if g.opts.Authenticator == nil {
		if r.TLS != nil {
			return certIdentity(r.TLS), nil
		}
		return nil, nil
	}
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return nil, &handler.Error{Code: proto.CodeUnauthenticated, Unprocessed: true,
			Message: "the server requires credentials: Authorization: Bearer TOKEN"}
	}
	if len(token) > proto.MaxHelloPayload {
		return nil, &handler.Error{Code: proto.CodeUnauthenticated, Message: "credentials refused", Unprocessed: true}
	}
	id, err := g.opts.Authenticator.Authenticate(r.Context(), r.Header.Get(HeaderAuthMethod), []byte(token))
	if err != nil {
		g.log.Info("rpcd: gateway authentication refused", "remote", r.RemoteAddr, "err", err)
		return nil, &handler.Error{Code: proto.CodeUnauthenticated, Message: handler.MessageOf(err), Unprocessed: true}
	}
	return id, nil
}

// certIdentity is the identity of a verified client certificate, as the
// reactor gives it: the subject's common name, its organizational units as
// roles; nil without one.
func certIdentity(st *tls.ConnectionState) *handler.Identity {
	if len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return nil
	}
	cert := st.PeerCertificates[0]
	return &handler.Identity{Subject: cert.Subject.CommonName, Method: "tls", Roles: cert.Subject.OrganizationalUnit}
}

// The trace context's metadata keys and the canonical header names that
// carry them, looked up in the map directly: Header.Values would
// canonicalize, and so allocate, a lower-case name on every request.
var (
	traceKeys = []struct{ meta, header string }{
		{proto.MetaTraceParent, textproto.CanonicalMIMEHeaderKey(proto.MetaTraceParent)},
		{proto.MetaTraceState, textproto.CanonicalMIMEHeaderKey(proto.MetaTraceState)},
	}
	baggageHeader = textproto.CanonicalMIMEHeaderKey(proto.MetaBaggage)
)

// metadata builds the call's metadata from the request headers:
// traceparent and tracestate, baggage (repeated headers joined with
// commas, one entry, as W3C Baggage reads them), then each Rpcd-Meta-*
// header in name order.
// On failure it returns the HTTP status to answer with.
func (g *Gateway) metadata(h http.Header) (proto.Metadata, int, error) {
	var md proto.Metadata
	var keys []string
	for name := range h {
		if len(name) > len(HeaderMetaPrefix) && strings.EqualFold(name[:len(HeaderMetaPrefix)], HeaderMetaPrefix) {
			keys = append(keys, name)
		}
	}
	sort.Strings(keys)
	add := func(key string, values []string) error {
		if err := proto.CheckMetadataKey(key); err != nil {
			return &handler.Error{Code: proto.CodeInvalidArgument, Message: "metadata header for " + key + ": " + handler.MessageOf(err), Unprocessed: true}
		}
		for _, v := range values {
			if len(v) > 0xffff {
				return &handler.Error{Code: proto.CodeInvalidArgument, Message: "metadata " + key + ": value longer than 65535 bytes", Unprocessed: true}
			}
			md = proto.AppendMetadata(md, key, []byte(v))
		}
		return nil
	}
	for _, key := range traceKeys {
		if vs := h[key.header]; len(vs) > 0 {
			_ = add(key.meta, vs) // the keys are valid; header values are far below 64 KiB unless the server allows more
		}
	}
	if vs := h[baggageHeader]; len(vs) > 0 {
		if err := add(proto.MetaBaggage, []string{strings.Join(vs, ",")}); err != nil {
			return nil, http.StatusBadRequest, err
		}
	}
	for _, name := range keys {
		key := strings.ToLower(name[len(HeaderMetaPrefix):])
		if strings.HasPrefix(key, "rpcd-") {
			return nil, http.StatusBadRequest, &handler.Error{Code: proto.CodeInvalidArgument, Unprocessed: true,
				Message: "metadata keys beginning rpcd- are reserved: " + name}
		}
		if err := add(key, h[name]); err != nil {
			return nil, http.StatusBadRequest, err
		}
	}
	if len(md) > g.opts.Limits.MaxMetadata {
		return nil, http.StatusRequestHeaderFieldsTooLarge, &handler.Error{Code: proto.CodeResourceExhausted, Unprocessed: true,
			Message: "metadata of " + strconv.Itoa(len(md)) + " bytes exceeds the limit of " + strconv.Itoa(g.opts.Limits.MaxMetadata)}
	}
	return md, 0, nil
}

// deadlineOf returns the call's deadline: the earlier of the Rpcd-Timeout
// header's and the request context's; zero for none.
func deadlineOf(r *http.Request) (time.Time, error) {
	deadline, _ := r.Context().Deadline()
	if v := r.Header.Get(HeaderTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return time.Time{}, &handler.Error{Code: proto.CodeInvalidArgument, Unprocessed: true,
				Message: HeaderTimeout + " " + strconv.Quote(v) + ": want a positive duration such as 250ms"}
		}
		if t := time.Now().Add(d); deadline.IsZero() || t.Before(deadline) {
			deadline = t
		}
	}
	return deadline, nil
}

// readAll reads the request body into buf; limitIs says what limit is,
// for the error. It fails, the call unrun and so Unprocessed, with
// ResourceExhausted if the body is longer than limit, DeadlineExceeded if
// it does not arrive within the server's read timeout, and InvalidArgument
// if it ends early or is not valid HTTP (a bad chunk); bodyStatus gives
// each its HTTP status.
func readAll(body io.Reader, length int64, limit int, limitIs string, buf []byte) ([]byte, error) {
	tooLarge := func(n string) error {
		return &handler.Error{Code: proto.CodeResourceExhausted, Unprocessed: true,
			Message: "body of " + n + " bytes exceeds the limit of " + strconv.Itoa(max(limit, 0)) + " (" + limitIs + ")"}
	}
	if length > int64(limit) {
		return buf, tooLarge(strconv.FormatInt(length, 10))
	}
	if length > 0 && cap(buf) < int(length) {
		buf = make([]byte, 0, length)
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // grow
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > limit {
			return buf[:0], tooLarge("more than " + strconv.Itoa(limit))
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf[:0], bodyError(err)
		}
	}
}

// bodyError is readAll's error for a body that could not be read.
func bodyError(err error) error {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return &handler.Error{Code: proto.CodeDeadlineExceeded, Message: "the body did not arrive within the read timeout", Unprocessed: true}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &handler.Error{Code: proto.CodeInvalidArgument, Message: "the body ended before its length", Unprocessed: true}
	case errors.As(err, &ne): // the connection failed: its message names sockets
		return &handler.Error{Code: proto.CodeInvalidArgument, Message: "the connection failed while the body was read", Unprocessed: true}
	}
	return &handler.Error{Code: proto.CodeInvalidArgument, Message: "reading the body: " + err.Error(), Unprocessed: true}
}

// bodyStatus is the HTTP status of readAll's error: 413 for a body past
// the limit, 408 for one too slow, 400 for one that is not whole.
func bodyStatus(err error) int {
	switch handler.CodeOf(err) {
	case proto.CodeResourceExhausted:
		return http.StatusRequestEntityTooLarge
	case proto.CodeDeadlineExceeded:
		return http.StatusRequestTimeout
	}
	return http.StatusBadRequest
}

// remoteAddr turns an http.Request's RemoteAddr into a net.Addr.
func remoteAddr(s string) net.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return net.TCPAddrFromAddrPort(ap)
	}
	return stringAddr(s)
}

// stringAddr is a remote address that is not host:port (a Unix socket).
type stringAddr string

func (a stringAddr) Network() string { return "unix" }
func (a stringAddr) String() string  { return string(a) }
