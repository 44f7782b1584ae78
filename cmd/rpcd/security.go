package main

import (
	"flag"
	"os"

	"github.com/rpcd/rpcd/client"
	rpcdaemon "github.com/rpcd/rpcd/daemon"
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
		if (f.tlsCert == "") != (f.tlsKey == "") {
			return usagef("-tls-cert and -tls-key go together")
		}
		cfg, err := client.TLSFiles{CA: f.tlsCA, Cert: f.tlsCert, Key: f.tlsKey, ServerName: f.tlsServerName}.Config()
		if err != nil {
			return err
		}
		opts.TLS = cfg
	}
	switch f.authMethod {
	case "", "token", "hmac":
	default:
		return usagef("-auth-method is %q, want token or hmac", f.authMethod)
	}
	var secret []byte
	var err error
	switch {
	case f.token != "" && f.tokenFile != "":
		return usagef("-token and -token-file: give one")
	case f.token != "":
		secret, err = client.TokenText(f.token, "-token")
	case f.tokenFile != "":
		secret, err = client.ReadToken(f.tokenFile)
	case os.Getenv(tokenEnv) != "":
		secret, err = client.TokenText(os.Getenv(tokenEnv), "$"+tokenEnv)
	case f.authMethod != "":
		return usagef("-auth-method needs a token: -token, -token-file or $%s", tokenEnv)
	default:
		return nil
	}
	if err != nil {
		return err
	}
	opts.Credentials = &client.Credentials{Method: f.authMethod, Secret: secret}
	return nil
}
