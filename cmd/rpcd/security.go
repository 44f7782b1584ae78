package main

import (
	"errors"
	"flag"

	"github.com/rpcd/rpcd/client"
)

// clientSecurityFlags are the flags of the commands that call a server
// (call, routes, bench) for TLS and authentication.
type clientSecurityFlags struct{ client.Security }

func (f *clientSecurityFlags) define(fs *flag.FlagSet) {
	fs.BoolVar(&f.TLS, "tls", false, "connect over TLS, trusting the system's CAs (implied by the other -tls flags)")
	fs.StringVar(&f.CA, "tls-ca", "", "trust the server certificates these CAs sign (PEM `file`) instead of the system's")
	fs.StringVar(&f.Cert, "tls-cert", "", "present this client certificate (PEM `file`) for mutual TLS; with -tls-key")
	fs.StringVar(&f.Key, "tls-key", "", "the client certificate's private key (PEM `file`)")
	fs.StringVar(&f.ServerName, "tls-server-name", "", "the `name` the server certificate must carry; default the host of -addr")
	fs.StringVar(&f.Token, "token", "", "authenticate with this `token` (visible to ps: prefer -token-file or $"+client.TokenEnv+")")
	fs.StringVar(&f.TokenFile, "token-file", "", "authenticate with the token in this `file`")
	fs.StringVar(&f.Method, "auth-method", "", "the token's `method`: token or hmac; empty lets the server try both")
}

// securityFlags names the fields of client.Security by their flags.
var securityFlags = map[string]string{"Cert": "-tls-cert", "Key": "-tls-key", "Token": "-token", "TokenFile": "-token-file", "Method": "-auth-method"}

// given reports whether any of the flags was set.
func (f *clientSecurityFlags) given() bool { return f.Security != client.Security{} }

// apply sets the TLS configuration and credentials the flags ask for in
// opts (client.Security.Apply); a mistake in the flags is a usage error.
func (f *clientSecurityFlags) apply(opts *client.Options) error {
	err := f.Security.Apply(opts)
	if se := (*client.SecurityError)(nil); errors.As(err, &se) {
		return usagef("%s", se.Text(func(field string) string { return securityFlags[field] }))
	}
	return err
}
