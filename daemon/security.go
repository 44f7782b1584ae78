package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/rpcd/rpcd/auth"
	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/discovery/etcd"
	"github.com/rpcd/rpcd/ratelimit"
)

// security is what a reload would swap, built from a Config in one
// place, newSecurity: the TLS configuration, the authenticator, the roles
// routes require, the topic policy, the rate limits and the log level.
type security struct {
	tls           *tls.Config
	authenticator auth.Authenticator
	roles         map[string][]string
	topics        *auth.TopicPermissions
	limits        map[string]ratelimit.Limit
	level         *slog.LevelVar
}

// newSecurity builds c's security from the rules check parsed, reading
// the files c names; every file that cannot be used is a ConfigError, all
// joined.
func newSecurity(c *Config, r *rules) (*security, error) {
	s := &security{roles: r.roles, topics: r.topics, limits: r.limits, level: new(slog.LevelVar)}
	s.level.Set(r.level)
	var errs []error
	if c.TLSCert != "" && c.TLSKey != "" {
		var err error
		s.tls, err = serverTLS(c)
		errs = append(errs, fileError(err, "tls-cert", c.TLSCert, "tls-key", c.TLSKey, "tls-client-ca", c.TLSClientCA))
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
