// Package auth authenticates rpcd connections and authorizes calls.
//
// A server given an Authenticator (reactor.Options.Authenticator) serves a
// connection only after its Hello (docs/protocol.md, "The handshake")
// carries credentials the Authenticator accepts; every call on the
// connection then carries the Identity it returned (handler.CallFrom(ctx).
// Identity). Two Authenticators come with rpcd: Tokens, a list of secrets,
// and HMAC, tokens signed with a shared key that carry their subject,
// roles and expiry. Require is the middleware that authorizes calls by
// identity, route by route (RequireFrom, by rules that change while the
// server runs); Topics says, role by role, which topics a connection may
// publish to and subscribe to (reactor.Options.Topics).
package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// Authenticator checks a connection's credentials; it is
// handler.Authenticator, named here beside its implementations.
type Authenticator = handler.Authenticator

// ErrRefused is what the built-in authenticators return for credentials
// they do not accept. It matches handler.ErrUnauthenticated.
var ErrRefused error = &handler.Error{Code: proto.CodeUnauthenticated, Message: "credentials refused"}

// Tokens accepts a connection whose credentials are one of its tokens, as
// the identity given for it. Comparisons take the same time whichever
// token matches, or none.
type Tokens map[string]*handler.Identity

// Authenticate implements Authenticator for the methods "token" and "".
func (t Tokens) Authenticate(_ context.Context, method string, credentials []byte) (*handler.Identity, error) {
	if method != "" && method != "token" {
		return nil, ErrRefused
	}
	var found *handler.Identity
	got := sha256.Sum256(credentials)
	for token, id := range t {
		// Digests of equal length, every token compared, the match or not:
		// the time taken says nothing of which tokens exist, nor how long.
		want := sha256.Sum256([]byte(token))
		if subtle.ConstantTimeCompare(want[:], got[:]) == 1 {
			found = id
		}
	}
	if found == nil {
		return nil, ErrRefused
	}
	id := *found
	id.Method = "token"
	return &id, nil
}

// HMAC accepts tokens signed with Key by Sign: a subject, roles and an
// expiry, in the clear, and an HMAC-SHA256 of them. It needs no list of
// tokens, and a token expires by itself.
type HMAC struct {
	Key []byte
	// Now, if set, is the clock expiry is checked against; time.Now by
	// default.
	Now func() time.Time
}

// claims is what an HMAC token says, signed.
type claims struct {
	Subject string   `json:"sub"`
	Roles   []string `json:"roles,omitempty"`
	Expiry  int64    `json:"exp"` // Unix seconds
}

var b64 = base64.RawURLEncoding

// Sign returns a token for id that expires at expiry.
func (h HMAC) Sign(id handler.Identity, expiry time.Time) string {
	payload, _ := json.Marshal(claims{Subject: id.Subject, Roles: id.Roles, Expiry: expiry.Unix()})
	mac := hmac.New(sha256.New, h.Key)
	mac.Write(payload)
	return b64.EncodeToString(payload) + "." + b64.EncodeToString(mac.Sum(nil))
}

// Authenticate implements Authenticator for the methods "hmac" and "".
func (h HMAC) Authenticate(_ context.Context, method string, credentials []byte) (*handler.Identity, error) {
	if method != "" && method != "hmac" {
		return nil, ErrRefused
	}
	if len(h.Key) == 0 {
		return nil, errors.New("rpcd: auth: HMAC without a key")
	}
	payload64, sig64, ok := strings.Cut(string(credentials), ".")
	if !ok {
		return nil, ErrRefused
	}
	payload, err1 := b64.DecodeString(payload64)
	sig, err2 := b64.DecodeString(sig64)
	if err1 != nil || err2 != nil {
		return nil, ErrRefused
	}
	mac := hmac.New(sha256.New, h.Key)
	mac.Write(payload)
	if !hmac.Equal(sig, mac.Sum(nil)) {
		return nil, ErrRefused
	}
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil || c.Subject == "" {
		return nil, ErrRefused
	}
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	if now().Unix() >= c.Expiry {
		return nil, &handler.Error{Code: proto.CodeUnauthenticated, Message: "token expired"}
	}
	return &handler.Identity{Subject: c.Subject, Method: "hmac", Roles: c.Roles}, nil
}

// Any accepts credentials that any of its authenticators accepts, trying
// them in order.
type Any []Authenticator

// Authenticate implements Authenticator.
func (a Any) Authenticate(ctx context.Context, method string, credentials []byte) (*handler.Identity, error) {
	for _, x := range a {
		if id, err := x.Authenticate(ctx, method, credentials); err == nil {
			return id, nil
		}
	}
	return nil, ErrRefused
}

// Require returns middleware that lets a call through only if allow says
// its connection's identity may call its route; others get
// PermissionDenied. A call on a connection with no identity (a server
// without an Authenticator, a TLS client without a certificate) gets
// Unauthenticated before allow is asked. The handler does not run for
// them; both refusals are marked Unprocessed.
func Require(allow func(id *handler.Identity, route string) bool) handler.Middleware {
	return func(next handler.Handler) handler.Handler {
		return handler.HandlerFunc(func(ctx context.Context, req, reply []byte) ([]byte, error) {
			if err := refusal(handler.CallFrom(ctx), allow); err != nil {
				return reply, err
			}
			return next.ServeRPC(ctx, req, reply)
		})
	}
}

// RequireFrom is Require with rules that change while the server runs
// (rpcd serve's reload): each call is judged by the allow function
// current returns at the time, and a nil one lets every call through,
// with an identity or without. current runs on every call: it should be
// as cheap as an atomic load.
func RequireFrom(current func() func(id *handler.Identity, route string) bool) handler.Middleware {
	return func(next handler.Handler) handler.Handler {
		return handler.HandlerFunc(func(ctx context.Context, req, reply []byte) ([]byte, error) {
			if allow := current(); allow != nil {
				if err := refusal(handler.CallFrom(ctx), allow); err != nil {
					return reply, err
				}
			}
			return next.ServeRPC(ctx, req, reply)
		})
	}
}

// refusal is Require's answer to the call c: nil if allow lets it
// through.
func refusal(c *handler.Call, allow func(*handler.Identity, string) bool) error {
	switch {
	case c == nil || c.Identity == nil:
		return &handler.Error{Code: proto.CodeUnauthenticated, Message: "the connection has not authenticated", Unprocessed: true}
	case !allow(c.Identity, c.Route):
		return &handler.Error{Code: proto.CodePermissionDenied, Message: c.Identity.Subject + " may not call " + c.Route, Unprocessed: true}
	}
	return nil
}

// Roles returns an allow function for Require: a route listed in byRoute
// needs one of its roles; routes not listed are open to any identity.
func Roles(byRoute map[string][]string) func(*handler.Identity, string) bool {
	return func(id *handler.Identity, route string) bool {
		roles, listed := byRoute[route]
		if !listed {
			return true
		}
		for _, r := range roles {
			if id.HasRole(r) {
				return true
			}
		}
		return false
	}
}
