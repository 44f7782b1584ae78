package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// Auth is the admin listener's optional authentication: a bearer token,
// mutual TLS, or both, any one of which lets a request through. The zero
// Auth asks for nothing.
type Auth struct {
	// Token, if not empty, lets through a request that carries it as
	// "Authorization: Bearer TOKEN". It is compared in constant time.
	Token []byte

	// ClientCerts lets through a request that came over TLS with a
	// client certificate the listener verified (mutual TLS: the
	// listener's tls.Config has ClientCAs and verifies a certificate
	// given; VerifyClientCertIfGiven lets the health probes in without
	// one).
	ClientCerts bool
}

// OpenPaths are the paths Require lets through without authentication:
// the health probes, which load balancers and orchestrators ask without
// credentials, and which tell nothing but whether the server serves.
var OpenPaths = []string{"/healthz", "/readyz"}

// Configured reports whether a asks for anything: a token or a client
// certificate.
func (a *Auth) Configured() bool { return a != nil && (len(a.Token) > 0 || a.ClientCerts) }

// Allows reports whether r authenticates by a: it carries the token, or
// came with a verified client certificate. An Auth that asks for nothing
// allows every request.
func (a *Auth) Allows(r *http.Request) bool {
	if !a.Configured() {
		return true
	}
	if a.ClientCerts && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		return true
	}
	if len(a.Token) == 0 {
		return false
	}
	given, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	// Hashes of equal length, so that neither the token's length nor its
	// first difference shows in the time taken.
	want, got := sha256.Sum256(a.Token), sha256.Sum256([]byte(strings.TrimSpace(given)))
	return subtle.ConstantTimeCompare(want[:], got[:]) == 1
}

// Require serves next behind a: every path but OpenPaths needs a request
// a allows, and one it does not is answered 401 Unauthorized with a
// WWW-Authenticate header (RFC 6750: Bearer, with error="invalid_token"
// for a token that is not the one). A nil Auth, or one that asks for
// nothing, lets every request through.
func Require(a *Auth, next http.Handler) http.Handler {
	if !a.Configured() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isOpen(r.URL.Path) || a.Allows(r) {
			next.ServeHTTP(w, r)
			return
		}
		challenge := `Bearer realm="rpcd admin"`
		if r.Header.Get("Authorization") != "" {
			challenge += `, error="invalid_token"`
		}
		if len(a.Token) == 0 { // mutual TLS alone: no token would do
			challenge = `Mutual-TLS realm="rpcd admin"`
		}
		w.Header().Set("WWW-Authenticate", challenge)
		plain(w, http.StatusUnauthorized, "rpcd: admin: authentication required: "+a.wants()+"\n")
	})
}

// wants says what a request must bring.
func (a *Auth) wants() string {
	switch {
	case len(a.Token) > 0 && a.ClientCerts:
		return "a bearer token or a client certificate"
	case a.ClientCerts:
		return "a client certificate"
	}
	return "a bearer token"
}

// isOpen reports whether path is one of OpenPaths.
func isOpen(path string) bool {
	for _, p := range OpenPaths {
		if path == p {
			return true
		}
	}
	return false
}
