package client_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/proto"
)

// writeCert writes a self-signed certificate and its key as PEM files in
// dir and returns their paths.
func writeCert(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// TestTLSFiles: the CA becomes the roots, the certificate and key the
// client's own; a certificate without its key, a CA file with no
// certificate and a missing file are errors.
func TestTLSFiles(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCert(t, dir)
	cfg, err := client.TLSFiles{CA: cert, Cert: cert, Key: key, ServerName: "svc"}.Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RootCAs == nil || len(cfg.Certificates) != 1 || cfg.ServerName != "svc" || cfg.MinVersion == 0 {
		t.Fatalf("config %+v", cfg)
	}
	if cfg, err := (client.TLSFiles{}).Config(); err != nil || cfg.RootCAs != nil {
		t.Fatalf("no files: %+v, %v; want the system's CAs", cfg, err)
	}
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]client.TLSFiles{
		"cert without key": {Cert: cert},
		"CA with no PEM":   {CA: notPEM},
		"missing CA":       {CA: filepath.Join(dir, "none")},
		"key not a key":    {Cert: cert, Key: notPEM},
	} {
		if _, err := f.Config(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestReadToken: a token file's text, trimmed; an empty one, or one past
// what a Hello carries, is refused.
func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if tok, err := client.ReadToken(write("ok", "  secret\n")); err != nil || string(tok) != "secret" {
		t.Fatalf("%q, %v", tok, err)
	}
	if _, err := client.ReadToken(write("empty", " \n")); err == nil || !strings.Contains(err.Error(), "no token") {
		t.Fatalf("empty file: %v", err)
	}
	if _, err := client.TokenText(strings.Repeat("x", proto.MaxHelloPayload+1), "test"); err == nil {
		t.Fatal("a token past the Hello's limit taken")
	}
	if _, err := client.ReadToken(filepath.Join(dir, "none")); err == nil {
		t.Fatal("a missing file read")
	}
}
