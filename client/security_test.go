package client_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rpcd/rpcd/client"
)

// TestSecurityApply: TLS from the files, or the system's CAs; the token
// given, else the one in the file, else $RPCD_TOKEN, with its method; the
// fields that do not go together, and a method that is none, are
// SecurityErrors naming them; a file that cannot be read is another error.
func TestSecurityApply(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCert(t, dir)
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(" from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	flagOf := map[string]string{"Cert": "-tls-cert", "Key": "-tls-key", "Token": "-token", "TokenFile": "-token-file", "Method": "-auth-method"}
	for _, tc := range []struct {
		name     string
		s        client.Security
		env      string
		tls      bool   // opts.TLS set
		secret   string // opts.Credentials' secret; "" for none
		method   string
		mistake  string // a SecurityError's Text, flags for fields
		message  string // and its Error
		otherErr bool   // an error that is not a SecurityError
	}{
		{name: "nothing"},
		{name: "TLS alone", s: client.Security{TLS: true}, tls: true},
		{name: "TLS implied", s: client.Security{TLSFiles: client.TLSFiles{CA: cert, Cert: cert, Key: key}}, tls: true},
		{name: "server name implies TLS", s: client.Security{TLSFiles: client.TLSFiles{ServerName: "svc"}}, tls: true},
		{name: "token", s: client.Security{Token: "t", Method: "hmac"}, env: "from-env", secret: "t", method: "hmac"},
		{name: "token file", s: client.Security{TokenFile: tokenFile}, env: "from-env", secret: "from-file"},
		{name: "environment", env: "from-env", secret: "from-env"},
		{name: "environment with a method", s: client.Security{Method: "token"}, env: "from-env", secret: "from-env", method: "token"},
		{name: "cert without key", s: client.Security{TLSFiles: client.TLSFiles{Cert: cert}, Token: "t"},
			mistake: "-tls-cert and -tls-key go together", message: "rpcd: client: Security.Cert and Security.Key go together"},
		{name: "unknown method", s: client.Security{Method: "kerberos", Token: "t"},
			mistake: `-auth-method is "kerberos", want token or hmac`, message: `rpcd: client: Security.Method is "kerberos", want token or hmac`},
		{name: "token twice", s: client.Security{Token: "t", TokenFile: tokenFile},
			mistake: "-token and -token-file: give one", message: "rpcd: client: Security.Token and Security.TokenFile: give one"},
		{name: "method without token", s: client.Security{Method: "hmac"},
			mistake: "-auth-method needs a token: -token, -token-file or $RPCD_TOKEN", message: "rpcd: client: Security.Method needs a token: Security.Token, Security.TokenFile or $RPCD_TOKEN"},
		{name: "missing CA", s: client.Security{TLSFiles: client.TLSFiles{CA: filepath.Join(dir, "none")}}, otherErr: true},
		{name: "missing token file", s: client.Security{TokenFile: filepath.Join(dir, "none")}, otherErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(client.TokenEnv, tc.env)
			var opts client.Options
			err := tc.s.Apply(&opts)
			var se *client.SecurityError
			switch {
			case tc.mistake != "":
				if !errors.As(err, &se) {
					t.Fatalf("error %v, want a SecurityError", err)
				}
				if got := se.Text(func(f string) string { return flagOf[f] }); got != tc.mistake {
					t.Errorf("Text %q, want %q", got, tc.mistake)
				}
				if err.Error() != tc.message {
					t.Errorf("Error %q, want %q", err, tc.message)
				}
				return
			case tc.otherErr:
				if err == nil || errors.As(err, &se) {
					t.Fatalf("error %v, want one that is not a SecurityError", err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if (opts.TLS != nil) != tc.tls {
				t.Errorf("TLS %v, want set: %v", opts.TLS, tc.tls)
			}
			switch c := opts.Credentials; {
			case tc.secret == "" && c != nil:
				t.Errorf("credentials %+v, want none", c)
			case tc.secret != "" && (c == nil || string(c.Secret) != tc.secret || c.Method != tc.method):
				t.Errorf("credentials %+v, want secret %q, method %q", c, tc.secret, tc.method)
			}
		})
	}
}
