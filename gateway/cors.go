package gateway

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// CORS is who may call the gateway from a page of another origin
// (Cross-Origin Resource Sharing). With no Origins it is off: the gateway
// sends no CORS headers, a browser lets only pages of the gateway's own
// origin read its replies, and a preflight (OPTIONS) is 405. With them, a
// preflight from a listed origin is answered 204 with the endpoint's
// methods and the headers it reads (Content-Type, Content-Encoding,
// Authorization, traceparent, tracestate, baggage and every Rpcd-*
// header), one from any other origin 403; replies to a listed origin say
// so (Access-Control-Allow-Origin). docs/gateway.md, "Calls from pages of
// other origins".
type CORS struct {
	// Origins are the origins whose pages may call, each as a browser
	// sends it in the Origin header: scheme://host[:port], http or https
	// ("https://app.example.com", "http://localhost:3000"); or the one
	// origin "*", any page at all. ParseOrigins reads them from a
	// comma-separated list.
	Origins []string

	// Credentials lets those pages send what the browser keeps for the
	// gateway's site (cookies, a TLS client certificate, HTTP
	// authentication it remembers): replies say
	// Access-Control-Allow-Credentials: true. Off, a page's fetch with
	// credentials: "include" is refused by its browser. A bearer token in
	// the Authorization header is not such a credential: a page sends it
	// either way. Not with "*".
	Credentials bool
}

// Validate reports what is wrong with c, or nil: an origin that
// ParseOrigins would refuse, "*" beside other origins, or "*" with
// Credentials.
func (c CORS) Validate() error {
	for _, o := range c.Origins {
		if o == "*" {
			if len(c.Origins) > 1 {
				return corsError("origin * stands alone: it is any origin")
			}
			if c.Credentials {
				return corsError("origin * with credentials would let every site call as the browser's user: list the origins")
			}
			continue
		}
		if err := checkOrigin(o); err != nil {
			return err
		}
	}
	return nil
}

// AllowsOrigin reports whether a page of origin, as its Origin header
// gives it, may call the gateway.
func (c CORS) AllowsOrigin(origin string) bool {
	for _, o := range c.Origins {
		if o == "*" || strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true
		}
	}
	return false
}

// CheckOrigin reports whether r may open a WebSocket, for
// ws.Options.CheckOrigin: one without an Origin header (not from a
// browser), one from the host it is addressed to (a page of the gateway's
// own origin), or one from an origin c allows.
func (c CORS) CheckOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || c.AllowsOrigin(origin) {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

// ParseOrigins reads a comma-separated list of origins, as -gateway-cors
// gives them: each scheme://host[:port] (http or https, no path), or "*"
// alone. Spaces around each are dropped; an empty list is none.
func ParseOrigins(s string) ([]string, error) {
	var out []string
	for o := range strings.SplitSeq(s, ",") {
		if o = strings.TrimSpace(o); o != "" {
			out = append(out, o)
		}
	}
	if err := (CORS{Origins: out}).Validate(); err != nil {
		return nil, err
	}
	return out, nil
}

// checkOrigin reports whether o is an origin as a browser serializes it.
func checkOrigin(o string) error {
	u, err := url.Parse(o)
	switch {
	case err != nil:
		return corsError("origin " + o + ": " + err.Error())
	case u.Scheme != "http" && u.Scheme != "https":
		return corsError("origin " + o + ": want http:// or https://")
	case u.Host == "" || u.User != nil || u.Opaque != "":
		return corsError("origin " + o + ": want scheme://host[:port]")
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return corsError("origin " + o + ": an origin has no path, query or fragment: want scheme://host[:port]")
	}
	return nil
}

func corsError(msg string) error { return errors.New("rpcd: gateway: CORS: " + msg) }

// corsPolicy is a CORS as a Gateway applies it.
type corsPolicy struct {
	on          bool
	any         bool            // "*": Access-Control-Allow-Origin: *
	origins     map[string]bool // lower case
	credentials bool
}

func newCORSPolicy(c CORS) corsPolicy {
	p := corsPolicy{on: len(c.Origins) > 0, credentials: c.Credentials, origins: map[string]bool{}}
	for _, o := range c.Origins {
		if o == "*" {
			p.any = true
		}
		p.origins[strings.ToLower(strings.TrimSuffix(o, "/"))] = true
	}
	return p
}

func (p *corsPolicy) allows(origin string) bool {
	return p.any || p.origins[strings.ToLower(origin)]
}

// The methods each endpoint answers a preflight with.
var (
	methodsPost = []string{"POST"}
	methodsGet  = []string{"GET, HEAD"}
)

// Header values of CORS replies, shared.
var (
	anyOriginValue   = []string{"*"}
	trueValue        = []string{"true"}
	exposeValue      = []string{"WWW-Authenticate, Content-Encoding"}
	maxAgeValue      = []string{"600"}
	corsRequestKey   = "Access-Control-Request-Method"
	corsHeadersKey   = "Access-Control-Request-Headers"
	allowOriginKey   = "Access-Control-Allow-Origin"
	allowCredsKey    = "Access-Control-Allow-Credentials"
	allowMethodsKey  = "Access-Control-Allow-Methods"
	allowHeadersKey  = "Access-Control-Allow-Headers"
	exposeHeadersKey = "Access-Control-Expose-Headers"
	maxAgeKey        = "Access-Control-Max-Age"
)

// handle applies the policy to r, whose endpoint takes methods: it
// answers a preflight (204, or 403 for an origin not allowed) and reports
// true, or sets the headers that let an allowed origin read the reply
// and reports false. Called only when the policy is on.
func (p *corsPolicy) handle(g *Gateway, w http.ResponseWriter, r *http.Request, tl tally, methods []string) bool {
	h := w.Header()
	if !p.any {
		h["Vary"] = varyOriginValue // the reply depends on the Origin, allowed or not
	}
	vs := r.Header["Origin"]
	if len(vs) == 0 {
		return false
	}
	origin := vs[0]
	allowed := p.allows(origin)
	if r.Method != http.MethodOptions || len(r.Header[corsRequestKey]) == 0 {
		if allowed {
			p.allowOrigin(h, origin)
			h[exposeHeadersKey] = exposeValue
		}
		return false
	}
	if !allowed {
		g.fail(w, r, tl, http.StatusForbidden, &handler.Error{Code: proto.CodePermissionDenied, Unprocessed: true,
			Message: "origin " + origin + " may not call this gateway: it is not in its CORS origins (-gateway-cors)"})
		return true
	}
	p.allowOrigin(h, origin)
	h[allowMethodsKey] = methods
	if asked := allowedHeaders(r.Header[corsHeadersKey]); asked != "" {
		h[allowHeadersKey] = []string{asked}
	}
	h[maxAgeKey] = maxAgeValue
	g.counts.response(tl.route, http.StatusNoContent)
	w.WriteHeader(http.StatusNoContent)
	return true
}

func (p *corsPolicy) allowOrigin(h http.Header, origin string) {
	if p.any {
		h[allowOriginKey] = anyOriginValue
		return
	}
	h[allowOriginKey] = []string{origin}
	if p.credentials {
		h[allowCredsKey] = trueValue
	}
}

// allowedHeaders returns those of the headers a preflight asks for that
// the gateway reads, comma-separated: a browser refuses the request if
// one it asked for is missing.
func allowedHeaders(asked []string) string {
	var out []string
	for _, v := range asked {
		for name := range strings.SplitSeq(v, ",") {
			name = strings.ToLower(strings.TrimSpace(name))
			switch {
			case name == "":
			case name == "content-type", name == "content-encoding", name == "authorization",
				name == "traceparent", name == "tracestate", name == "baggage",
				strings.HasPrefix(name, "rpcd-"):
				out = append(out, name)
			}
		}
	}
	return strings.Join(out, ", ")
}
