package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/rpcd/rpcd/proto"
)

// TLSFiles names the files of a client's TLS configuration, for programs
// (rpcd call and bench among them) that take them from their users.
type TLSFiles struct {
	CA         string // PEM certificates of the CAs the server's certificate is checked against; the system's if empty
	Cert, Key  string // PEM client certificate and its key, for mutual TLS; both or neither
	ServerName string // the name the server's certificate must carry; default the host dialled
}

// Config reads the files into a TLS configuration for Options.TLS, at
// least TLS 1.2.
func (f TLSFiles) Config() (*tls.Config, error) {
	cfg := &tls.Config{ServerName: f.ServerName, MinVersion: tls.VersionTLS12}
	if f.CA != "" {
		pool, err := LoadCAs(f.CA)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if (f.Cert == "") != (f.Key == "") {
		return nil, errors.New("rpcd: a client certificate needs its key, and a key its certificate")
	}
	if f.Cert != "" {
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("rpcd: loading the client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// LoadCAs reads a PEM file of certificates into a pool.
func LoadCAs(file string) (*x509.CertPool, error) {
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

// ReadToken reads a token for Credentials from file: its text, spaces
// around it trimmed. An empty file, or a token longer than a Hello may
// carry, is an error.
func ReadToken(file string) ([]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("rpcd: reading the token: %w", err)
	}
	return TokenText(strings.TrimSpace(string(b)), file)
}

// TokenText returns token, which from names (a file, a variable), as
// Credentials' Secret, refusing an empty one and one longer than a Hello
// may carry.
func TokenText(token, from string) ([]byte, error) {
	if token == "" {
		return nil, fmt.Errorf("rpcd: no token in %s", from)
	}
	if len(token) > proto.MaxHelloPayload {
		return nil, fmt.Errorf("rpcd: the token has %d bytes, want at most %d", len(token), proto.MaxHelloPayload)
	}
	return []byte(token), nil
}
