package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/rpcd/rpcd/client"
	rpcdaemon "github.com/rpcd/rpcd/daemon"
	"github.com/rpcd/rpcd/proto"
)

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
const tokenEnv = rpcdaemon.TokenEnv

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
			pool, err := rpcdaemon.LoadCAs(f.tlsCA)
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
