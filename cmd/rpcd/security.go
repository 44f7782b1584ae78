package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/rpcd/rpcd/auth"
	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// securityFlags are serve's flags for TLS and authentication.
type securityFlags struct {
	tlsCert, tlsKey  string
	tlsClientCA      string
	tlsClientAuth    string
	authTokens       string
	authHMACKeyFile  string
	authRequireRoles string
	authTopics       string
}

func (f *securityFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.tlsCert, "tls-cert", "", "serve TLS with this certificate (PEM `file`); with -tls-key")
	fs.StringVar(&f.tlsKey, "tls-key", "", "the certificate's private key (PEM `file`)")
	fs.StringVar(&f.tlsClientCA, "tls-client-ca", "", "verify client certificates against these CAs (PEM `file`): mutual TLS")
	fs.StringVar(&f.tlsClientAuth, "tls-client-auth", "require", "with -tls-client-ca: `require` a client certificate, or verify-if-given")
	fs.StringVar(&f.authTokens, "auth-tokens", "", "require a Hello with a token from this `file`: one per line, \"TOKEN SUBJECT [ROLE,...]\"")
	fs.StringVar(&f.authHMACKeyFile, "auth-hmac-key", "", "require a Hello with a token signed with the key in this `file` (see rpcd token)")
	fs.StringVar(&f.authRequireRoles, "auth-require", "", "authorize routes by role: `ROUTE=ROLE[|ROLE...],...`; routes not listed are open to any identity")
	fs.StringVar(&f.authTopics, "auth-topics", "", "who may publish and subscribe where: `RULE;...`, each pub:PATTERN=ROLE[|ROLE...], sub:..., deny-pub:... or deny-sub:... (role * is every connection); with any rule, the rest is refused (docs/two-way.md)")
}

// tlsConfig returns the TLS configuration the flags ask for; nil for none.
func (f *securityFlags) tlsConfig() (*tls.Config, error) {
	if f.tlsCert == "" && f.tlsKey == "" {
		if f.tlsClientCA != "" {
			return nil, usagef("-tls-client-ca needs -tls-cert and -tls-key")
		}
		return nil, nil
	}
	if f.tlsCert == "" || f.tlsKey == "" {
		return nil, usagef("-tls-cert and -tls-key go together")
	}
	cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("rpcd: loading the TLS certificate: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if f.tlsClientCA != "" {
		pool, err := loadCAs(f.tlsClientCA)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		switch f.tlsClientAuth {
		case "require":
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		case "verify-if-given":
			cfg.ClientAuth = tls.VerifyClientCertIfGiven
		default:
			return nil, usagef("-tls-client-auth is %q, want require or verify-if-given", f.tlsClientAuth)
		}
	}
	return cfg, nil
}

// loadCAs reads a PEM file of certificates into a pool.
func loadCAs(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("rpcd: reading CAs: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("rpcd: no PEM certificate in %s", file)
	}
	return pool, nil
}

// authenticator returns the Authenticator the flags ask for; nil for none.
func (f *securityFlags) authenticator() (auth.Authenticator, error) {
	var all auth.Any
	if f.authTokens != "" {
		tokens, err := readTokens(f.authTokens)
		if err != nil {
			return nil, err
		}
		all = append(all, tokens)
	}
	if f.authHMACKeyFile != "" {
		key, err := readKey(f.authHMACKeyFile)
		if err != nil {
			return nil, err
		}
		all = append(all, auth.HMAC{Key: key})
	}
	switch len(all) {
	case 0:
		return nil, nil
	case 1:
		return all[0], nil
	}
	return all, nil
}

// readTokens reads a token file: "TOKEN SUBJECT [ROLE,...]" per line; blank
// lines and lines starting with # are skipped.
func readTokens(file string) (auth.Tokens, error) {
	fh, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("rpcd: reading tokens: %w", err)
	}
	defer fh.Close()
	tokens := auth.Tokens{}
	sc := bufio.NewScanner(fh)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 || len(fields) > 3 {
			return nil, fmt.Errorf("rpcd: %s:%d: want TOKEN SUBJECT [ROLE,...]", file, n)
		}
		id := &handler.Identity{Subject: fields[1]}
		if len(fields) == 3 {
			id.Roles = strings.Split(fields[2], ",")
		}
		tokens[fields[0]] = id
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("rpcd: reading tokens: %w", err)
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("rpcd: no token in %s", file)
	}
	return tokens, nil
}

// readKey reads an HMAC key: the file's bytes, trailing white space
// dropped; at least 16 bytes.
func readKey(file string) ([]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("rpcd: reading the HMAC key: %w", err)
	}
	key := []byte(strings.TrimRight(string(b), " \t\r\n"))
	if len(key) < 16 {
		return nil, fmt.Errorf("rpcd: the HMAC key in %s has %d bytes, want at least 16", file, len(key))
	}
	return key, nil
}

// requireRoles parses -auth-require: "ROUTE=ROLE|ROLE,ROUTE=ROLE".
func (f *securityFlags) requireRoles() (map[string][]string, error) {
	if f.authRequireRoles == "" {
		return nil, nil
	}
	byRoute := map[string][]string{}
	for _, item := range strings.Split(f.authRequireRoles, ",") {
		route, roles, ok := strings.Cut(item, "=")
		if !ok || route == "" || roles == "" {
			return nil, usagef("-auth-require item %q is not ROUTE=ROLE[|ROLE...]", item)
		}
		byRoute[route] = strings.Split(roles, "|")
	}
	return byRoute, nil
}

// topicRules parses -auth-topics: rules separated by ';' or new lines,
// each ACTION:PATTERN=ROLE[|ROLE...], ACTION one of pub, sub, deny-pub and
// deny-sub; nil for none. A pattern may hold any byte a pattern may but ';'
// (the roles follow its last '=').
func (f *securityFlags) topicRules() (map[string]auth.TopicRules, error) {
	items := strings.FieldsFunc(f.authTopics, func(r rune) bool { return r == ';' || r == '\n' })
	byRole := map[string]auth.TopicRules{}
	for _, item := range items {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		action, rest, _ := strings.Cut(item, ":")
		i := strings.LastIndexByte(rest, '=')
		if i < 0 || rest[:i] == "" || rest[i+1:] == "" {
			return nil, usagef("-auth-topics rule %q is not ACTION:PATTERN=ROLE[|ROLE...]", item)
		}
		pattern, roles := rest[:i], strings.Split(rest[i+1:], "|")
		if err := proto.ValidPattern([]byte(pattern)); err != nil {
			return nil, usagef("-auth-topics rule %q: %v", item, strings.TrimPrefix(err.Error(), "rpcd: protocol error: "))
		}
		for _, role := range roles {
			if role == "" {
				return nil, usagef("-auth-topics rule %q has an empty role", item)
			}
			r := byRole[role]
			switch action {
			case "pub":
				r.Publish.Allow = append(r.Publish.Allow, pattern)
			case "sub":
				r.Subscribe.Allow = append(r.Subscribe.Allow, pattern)
			case "deny-pub":
				r.Publish.Deny = append(r.Publish.Deny, pattern)
			case "deny-sub":
				r.Subscribe.Deny = append(r.Subscribe.Deny, pattern)
			default:
				return nil, usagef("-auth-topics rule %q: action %q, want pub, sub, deny-pub or deny-sub", item, action)
			}
			byRole[role] = r
		}
	}
	if len(byRole) == 0 {
		if strings.TrimSpace(f.authTopics) != "" {
			return nil, usagef("-auth-topics has no rule")
		}
		return nil, nil
	}
	return byRole, nil
}

// namesRoles reports whether rules name a role other than auth.EveryRole:
// rules only an authenticated identity can have.
func namesRoles(rules map[string]auth.TopicRules) bool {
	for role := range rules {
		if role != auth.EveryRole {
			return true
		}
	}
	return false
}

// clientSecurityFlags are the flags of the commands that call a server
// (call, routes, bench) for TLS and authentication.
type clientSecurityFlags struct {
	tls           bool
	tlsCA         string
	tlsCert       string
	tlsKey        string
	tlsServerName string
	token         string
	tokenFile     string
	authMethod    string
}

// tokenEnv names the environment variable a token is read from when no
// flag gives one: unlike -token, it is not shown to other users by ps.
const tokenEnv = "RPCD_TOKEN"

func (f *clientSecurityFlags) define(fs *flag.FlagSet) {
	fs.BoolVar(&f.tls, "tls", false, "connect over TLS, trusting the system's CAs (implied by the other -tls flags)")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "trust the server certificates these CAs sign (PEM `file`) instead of the system's")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "present this client certificate (PEM `file`) for mutual TLS; with -tls-key")
	fs.StringVar(&f.tlsKey, "tls-key", "", "the client certificate's private key (PEM `file`)")
	fs.StringVar(&f.tlsServerName, "tls-server-name", "", "the `name` the server certificate must carry; default the host of -addr")
	fs.StringVar(&f.token, "token", "", "authenticate with this `token` (visible to ps: prefer -token-file or $"+tokenEnv+")")
	fs.StringVar(&f.tokenFile, "token-file", "", "authenticate with the token in this `file`")
	fs.StringVar(&f.authMethod, "auth-method", "", "the token's `method`: token or hmac; empty lets the server try both")
}

// given reports whether any of the flags was set.
func (f *clientSecurityFlags) given() bool {
	return f.tls || f.tlsCA != "" || f.tlsCert != "" || f.tlsKey != "" || f.tlsServerName != "" ||
		f.token != "" || f.tokenFile != "" || f.authMethod != ""
}

// apply sets the TLS configuration and credentials the flags ask for in
// opts.
func (f *clientSecurityFlags) apply(opts *client.Options) error {
	if f.tls || f.tlsCA != "" || f.tlsCert != "" || f.tlsKey != "" || f.tlsServerName != "" {
		cfg := &tls.Config{ServerName: f.tlsServerName, MinVersion: tls.VersionTLS12}
		if f.tlsCA != "" {
			pool, err := loadCAs(f.tlsCA)
			if err != nil {
				return err
			}
			cfg.RootCAs = pool
		}
		if (f.tlsCert == "") != (f.tlsKey == "") {
			return usagef("-tls-cert and -tls-key go together")
		}
		if f.tlsCert != "" {
			cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
			if err != nil {
				return fmt.Errorf("rpcd: loading the client certificate: %w", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		opts.TLS = cfg
	}

	var secret string
	switch {
	case f.token != "" && f.tokenFile != "":
		return usagef("-token and -token-file: give one")
	case f.token != "":
		secret = f.token
	case f.tokenFile != "":
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return fmt.Errorf("rpcd: reading the token: %w", err)
		}
		secret = strings.TrimSpace(string(b))
		if secret == "" {
			return fmt.Errorf("rpcd: no token in %s", f.tokenFile)
		}
	default:
		secret = os.Getenv(tokenEnv)
	}
	switch f.authMethod {
	case "", "token", "hmac":
	default:
		return usagef("-auth-method is %q, want token or hmac", f.authMethod)
	}
	if secret == "" {
		if f.authMethod != "" {
			return usagef("-auth-method needs a token: -token, -token-file or $%s", tokenEnv)
		}
		return nil
	}
	if len(secret) > proto.MaxHelloPayload {
		return fmt.Errorf("rpcd: the token has %d bytes, want at most %d", len(secret), proto.MaxHelloPayload)
	}
	opts.Credentials = &client.Credentials{Method: f.authMethod, Secret: []byte(secret)}
	return nil
}
