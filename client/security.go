package client

import (
	"os"

	"github.com/rpcd/rpcd/internal/optcheck"
)

// TokenEnv is the environment variable Security takes a token from when it
// is given none: unlike a token on a command line, it is not shown to
// other users by ps.
const TokenEnv = "RPCD_TOKEN"

// Security is how a client secures its connections and says who it is, as
// a program takes it from its users (rpcd's commands that call a server
// take it from their -tls and -token flags): TLS from files, and a token
// given as text, in a file, or in $RPCD_TOKEN. The zero Security asks for
// neither, but for a token in $RPCD_TOKEN.
type Security struct {
	// TLS connects over TLS, trusting the system's CAs; any field of
	// TLSFiles implies it.
	TLS bool
	TLSFiles

	Token     string // the token itself
	TokenFile string // a file that holds the token (ReadToken)
	Method    string // the token's method, "token" or "hmac" (Credentials.Method); empty lets the server try both
}

// Apply sets opts.TLS and opts.Credentials as s says, reading its files.
// The token is Token, else the one in TokenFile, else the value of
// $RPCD_TOKEN; with none, opts.Credentials is left as it is. A mistake in
// s itself, fields that do not go together or a Method that is none, is a
// *SecurityError; the others (a file that cannot be read or holds no
// certificate, an empty token) are not. TLS is judged, and its files
// read, before the token.
func (s Security) Apply(opts *Options) error {
	if s.TLS || s.TLSFiles != (TLSFiles{}) {
		if (s.Cert == "") != (s.Key == "") {
			return securityErrorf("%s and %s go together", securityField("Cert"), securityField("Key"))
		}
		cfg, err := s.TLSFiles.Config()
		if err != nil {
			return err
		}
		opts.TLS = cfg
	}
	switch s.Method {
	case "", "token", "hmac":
	default:
		return securityErrorf("%s is %q, want token or hmac", securityField("Method"), s.Method)
	}
	var secret []byte
	var err error
	switch {
	case s.Token != "" && s.TokenFile != "":
		return securityErrorf("%s and %s: give one", securityField("Token"), securityField("TokenFile"))
	case s.Token != "":
		secret, err = TokenText(s.Token, "the token given")
	case s.TokenFile != "":
		secret, err = ReadToken(s.TokenFile)
	case os.Getenv(TokenEnv) != "":
		secret, err = TokenText(os.Getenv(TokenEnv), "$"+TokenEnv)
	case s.Method != "":
		return securityErrorf("%s needs a token: %s, %s or $%s", securityField("Method"), securityField("Token"), securityField("TokenFile"), TokenEnv)
	default:
		return nil
	}
	if err != nil {
		return err
	}
	opts.Credentials = &Credentials{Method: s.Method, Secret: secret}
	return nil
}

// A SecurityError is a mistake in a Security that no file can mend: fields
// that do not go together, or a Method that is none. Its message names the
// fields as Security's ("Security.Cert"); Text names them as the program's
// user knows them (rpcd call: "-tls-cert").
type SecurityError struct{ msg optcheck.Named }

// securityField is the name of a field of Security in a SecurityError.
type securityField = optcheck.Name

func securityErrorf(format string, args ...any) *SecurityError {
	return &SecurityError{optcheck.Namedf(format, args...)}
}

// Error returns the message, fields named "Security.Field".
func (e *SecurityError) Error() string {
	return "rpcd: client: " + e.Text(func(field string) string { return "Security." + field })
}

// Text returns the message with each field it names written name(field),
// field being the name of a field of Security ("Cert", "TokenFile").
func (e *SecurityError) Text(name func(field string) string) string { return e.msg.Text(name) }
