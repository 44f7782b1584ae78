package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/rpcd/rpcd/auth"
	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/discovery/etcd"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/ratelimit"
)

// security is what a reload swaps, built from a Config in one place,
// newSecurity: the TLS configuration, the authenticator, the roles routes
// require, the topic policy, the rate limits and the log level. The
// daemon holds the one it runs in an atomic pointer (Daemon.sec); the
// reactor, the gateway and the middleware read it through the views
// below at each use, one atomic load, so that a reload (reload.go) swaps
// it whole.
type security struct {
	cfg           Config      // the settings it was built from, but those that need an upgrade, which are the running ones
	tls           *tls.Config // the RPC port's; nil without TLS
	gatewayTLS    *tls.Config // the gateway's: tls offering HTTP/2
	authenticator auth.Authenticator
	roles         map[string][]string
	allow         func(*handler.Identity, string) bool // auth.Roles(roles); nil without roles
	topics        *auth.TopicPermissions
	limits        map[string]ratelimit.Limit
	limiter       *ratelimit.Limiter // of limits; nil without
	level         slog.Level

	generation uint64    // 1 for New's, one more for each reload applied
	loaded     time.Time // when it was built
}

// newSecurity builds c's security from the rules check parsed, reading
// the files c names; every file that cannot be used is a ConfigError, all
// joined.
func newSecurity(c *Config, r *rules) (*security, error) {
	s := &security{cfg: *c, roles: r.roles, topics: r.topics, limits: r.limits, level: r.level, loaded: time.Now()}
	if r.roles != nil {
		s.allow = auth.Roles(r.roles)
	}
	if r.limits != nil {
		s.limiter = ratelimit.NewLimiter(r.limits)
	}
	var errs []error
	if c.TLSCert != "" && c.TLSKey != "" {
		var err error
		s.tls, err = serverTLS(c)
		errs = append(errs, fileError(err, "tls-cert", c.TLSCert, "tls-key", c.TLSKey, "tls-client-ca", c.TLSClientCA))
		if s.tls != nil {
			s.gatewayTLS = s.tls.Clone()
			s.gatewayTLS.NextProtos = []string{"h2", "http/1.1"}
		}
	}
	var all auth.Any
	if c.AuthTokens != "" {
		tokens, err := auth.ReadTokens(c.AuthTokens)
		errs = append(errs, fileError(err, "auth-tokens", c.AuthTokens))
		all = append(all, tokens)
	}
	if c.AuthHMACKey != "" {
		key, err := auth.ReadHMACKey(c.AuthHMACKey)
		errs = append(errs, fileError(err, "auth-hmac-key", c.AuthHMACKey))
		all = append(all, auth.HMAC{Key: key})
	}
	switch len(all) {
	case 1:
		s.authenticator = all[0]
	case 2:
		s.authenticator = all
	}
	return s, errors.Join(errs...)
}

// The views of the security the daemon runs now, which the reactor, the
// gateway and the middleware are given in its place.

// authenticator returns the authenticator the reactor and the gateway
// take, which asks the running security's; nil for a daemon that started
// without one (turning authentication on or off needs an upgrade).
func (d *Daemon) authenticator() auth.Authenticator {
	if d.sec.Load().authenticator == nil {
		return nil
	}
	return liveAuthenticator{d}
}

type liveAuthenticator struct{ d *Daemon }

func (a liveAuthenticator) Authenticate(ctx context.Context, method string, credentials []byte) (*handler.Identity, error) {
	return a.d.sec.Load().authenticator.Authenticate(ctx, method, credentials)
}

// topicPolicy is the reactor's Options.Topics: the running security's
// topic permissions, asked once per connection at its first Publish or
// Subscribe; without any, every connection may publish and subscribe
// anywhere, as with no policy.
type topicPolicy struct{ d *Daemon }

func (p topicPolicy) Access(id *handler.Identity) handler.TopicAccess {
	if t := p.d.sec.Load().topics; t != nil {
		return t.Access(id)
	}
	return everywhere{}
}

func (p topicPolicy) Label(topicOrPattern []byte) string {
	if t := p.d.sec.Load().topics; t != nil {
		return t.Label(topicOrPattern)
	}
	return "other"
}

// everywhere is the topic access of a daemon without topic rules.
type everywhere struct{}

func (everywhere) MayPublish([]byte) bool   { return true }
func (everywhere) MaySubscribe([]byte) bool { return true }

// guard is the middleware of the running security's roles
// (auth.RequireFrom) and then rate limits (ratelimit.PerRouteFrom: calls
// refused by authorization take no token). It is in every daemon's
// registry, so that a reload may add either; a call with neither pays an
// atomic load and a branch.
func (d *Daemon) guard() handler.Middleware {
	return func(next handler.Handler) handler.Handler {
		guarded := auth.RequireFrom(d.allow)(ratelimit.PerRouteFrom(d.limiter)(next))
		return handler.HandlerFunc(func(ctx context.Context, req, reply []byte) ([]byte, error) {
			if s := d.sec.Load(); s.allow == nil && s.limiter == nil {
				return next.ServeRPC(ctx, req, reply)
			}
			return guarded.ServeRPC(ctx, req, reply)
		})
	}
}

// allow returns the running security's allow function for
// auth.RequireFrom; nil without roles.
func (d *Daemon) allow() func(*handler.Identity, string) bool { return d.sec.Load().allow }

// limiter returns the running security's Limiter for
// ratelimit.PerRouteFrom; nil without rate limits.
func (d *Daemon) limiter() *ratelimit.Limiter { return d.sec.Load().limiter }

// tlsConfig returns the TLS configuration the RPC port (or, for the
// gateway, the gateway) serves with, whose every handshake takes the
// running security's certificate and client CAs; nil for a daemon that
// started without TLS (turning TLS on or off needs an upgrade).
func (d *Daemon) tlsConfig(gateway bool) *tls.Config {
	if d.sec.Load().tls == nil {
		return nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		if gateway {
			return d.sec.Load().gatewayTLS, nil
		}
		return d.sec.Load().tls, nil
	}}
	if gateway {
		cfg.NextProtos = []string{"h2", "http/1.1"}
	}
	return cfg
}

// serverTLS returns the TLS configuration of c's certificate, key and
// client CAs.
func serverTLS(c *Config) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("rpcd: loading the TLS certificate: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.TLSClientCA != "" {
		if cfg.ClientCAs, err = LoadCAs(c.TLSClientCA); err != nil {
			return nil, err
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		if c.TLSClientAuth == "verify-if-given" {
			cfg.ClientAuth = tls.VerifyClientCertIfGiven
		}
	}
	return cfg, nil
}

// LoadCAs reads a PEM file of certificates into a pool: client.LoadCAs.
func LoadCAs(file string) (*x509.CertPool, error) { return client.LoadCAs(file) }

// RegisterEtcdScheme, if any EtcdAccess setting of c is set, has the
// etcd:// targets of client.DialService reach etcd as they say, their files
// read (EtcdConfig, etcd.RegisterScheme); a mistake is a ConfigError. rpcd
// call and bench do so with their -etcd-... flags, for an etcd:// -addr.
func (c *Config) RegisterEtcdScheme() error {
	if !c.etcdAccessGiven() {
		return nil
	}
	cfg, err := c.EtcdConfig()
	if err != nil {
		return err
	}
	etcd.RegisterScheme("etcd", cfg)
	return nil
}

// EtcdConfig returns how to reach etcd at c.Etcd's endpoints with the
// EtcdAccess settings, their files read; a mistake is a ConfigError.
// rpcd's clients take it for an etcd:// address.
func (c *Config) EtcdConfig() (etcd.Config, error) {
	cfg := etcd.Config{Endpoints: etcd.Endpoints(c.Etcd)}
	if err := c.checkEtcdAccess(); err != nil {
		return cfg, err
	}
	files := []string{"etcd-cacert", c.EtcdCACert, "etcd-cert", c.EtcdCert, "etcd-key", c.EtcdKey, "etcd-password-file", c.EtcdPasswordFile}
	if c.EtcdTLS || c.EtcdCACert != "" || c.EtcdCert != "" {
		var err error
		if cfg.TLS, err = etcd.TLSFiles(c.EtcdCACert, c.EtcdCert, c.EtcdKey); err != nil {
			return cfg, fileError(err, files...)
		}
	}
	if c.EtcdUser != "" {
		b, err := os.ReadFile(c.EtcdPasswordFile)
		if err != nil {
			return cfg, fileError(fmt.Errorf("rpcd: reading the etcd password: %w", err), files...)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if cfg.Password = strings.TrimRight(line, "\r"); cfg.Password == "" {
			return cfg, fileError(fmt.Errorf("rpcd: no etcd password on the first line of %s", c.EtcdPasswordFile), files...)
		}
		cfg.Username = c.EtcdUser
	}
	return cfg, nil
}
