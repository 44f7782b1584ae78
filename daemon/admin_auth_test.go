package daemon

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// adminPKI is a CA's files, a server certificate for 127.0.0.1 that it
// signs, and a client certificate it signs and one it does not.
type adminPKI struct {
	caFile, certFile, keyFile string
	pool                      *x509.CertPool
	client, stranger          tls.Certificate
}

func writeAdminPKI(t *testing.T, dir string) adminPKI {
	t.Helper()
	newCA := func(name string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		ca, _ := x509.ParseCertificate(der)
		return ca, key, der
	}
	leaf := func(ca *x509.Certificate, caKey *ecdsa.PrivateKey, serial int64, usage x509.ExtKeyUsage) (tls.Certificate, []byte, []byte) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "rpcd test"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, _ := x509.MarshalECPrivateKey(key)
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, der, kb
	}
	ca, caKey, caDER := newCA("rpcd admin CA")
	other, otherKey, _ := newCA("another CA")
	p := adminPKI{caFile: filepath.Join(dir, "ca.pem"), certFile: filepath.Join(dir, "admin.pem"), keyFile: filepath.Join(dir, "admin-key.pem"), pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	_, der, kb := leaf(ca, caKey, 2, x509.ExtKeyUsageServerAuth)
	writeFile(t, p.caFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	writeFile(t, p.certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	writeFile(t, p.keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})))
	p.client, _, _ = leaf(ca, caKey, 3, x509.ExtKeyUsageClientAuth)
	p.stranger, _, _ = leaf(other, otherKey, 4, x509.ExtKeyUsageClientAuth)
	return p
}

// runAdmin runs a daemon with cfg and an admin listener on loopback, and
// returns it and the admin listener's address.
func runAdmin(t *testing.T, cfg Config) (*Daemon, string) {
	t.Helper()
	cfg.Addr, cfg.Admin = "127.0.0.1:0", "127.0.0.1:0"
	d, err := New(cfg, WithLogOutput(&syncBuffer{}))
	if err != nil {
		t.Fatal(err)
	}
	run(t, d)
	return d, d.AdminAddr().String()
}

// get sends method to url with hc and the given header, and returns the
// status and WWW-Authenticate, or the error.
func get(t *testing.T, hc *http.Client, method, url string, headers ...string) (int, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), nil
}

// TestAdminToken: with admin-token-file, every admin path but the health
// probes answers 401 with a Bearer challenge to a request without the
// token or with another, and serves one with it.
func TestAdminToken(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "admin-token")
	writeFile(t, tokenFile, "s3cret-admin-token\nignored\n")
	cfg := DefaultConfig()
	cfg.AdminTokenFile = tokenFile
	_, addr := runAdmin(t, cfg)
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	base := "http://" + addr
	for _, path := range []string{"/metrics", "/stats.json", "/", "/debug/pprof/", "/record"} {
		code, challenge, err := get(t, hc, http.MethodGet, base+path)
		if err != nil || code != http.StatusUnauthorized || !strings.HasPrefix(challenge, "Bearer ") || strings.Contains(challenge, "invalid_token") {
			t.Errorf("GET %s without a token: %d %q %v, want 401 with a Bearer challenge", path, code, challenge, err)
		}
		for _, bad := range []string{"Bearer s3cret-admin-toke", "Bearer s3cret-admin-token2", "Basic s3cret-admin-token", "s3cret-admin-token"} {
			code, challenge, err = get(t, hc, http.MethodGet, base+path, "Authorization", bad)
			if err != nil || code != http.StatusUnauthorized || !strings.Contains(challenge, `error="invalid_token"`) {
				t.Errorf("GET %s with %q: %d %q %v, want 401 invalid_token", path, bad, code, challenge, err)
			}
		}
	}
	for _, path := range []string{"/metrics", "/stats.json", "/"} {
		if code, _, err := get(t, hc, http.MethodGet, base+path, "Authorization", "Bearer s3cret-admin-token"); err != nil || code != http.StatusOK {
			t.Errorf("GET %s with the token: %d %v, want 200", path, code, err)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _, err := get(t, hc, http.MethodGet, base+path); err != nil || code != http.StatusOK {
			t.Errorf("GET %s without a token: %d %v, want 200 (a health probe)", path, code, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if answer, err := Ready(ctx, addr); err != nil || answer != "ready" {
		t.Errorf("Ready: %q, %v", answer, err)
	}
	if _, err := RequestUpgrade(ctx, addr); err == nil || !strings.Contains(err.Error(), "requires authentication") {
		t.Errorf("RequestUpgrade without the token: %v, want an error saying authentication is required", err)
	}
}

// TestAdminMutualTLS: with admin-tls-cert, -key and admin-client-ca, the
// admin listener serves HTTPS; a request with a client certificate the
// CA signed passes, one without gets 401, one signed by another CA is
// not let in either; the health probes need none.
func TestAdminMutualTLS(t *testing.T) {
	p := writeAdminPKI(t, t.TempDir())
	cfg := DefaultConfig()
	cfg.AdminTLSCert, cfg.AdminTLSKey, cfg.AdminClientCA = p.certFile, p.keyFile, p.caFile
	_, addr := runAdmin(t, cfg)
	client := func(cert *tls.Certificate) *http.Client {
		tc := &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}
		if cert != nil {
			tc.Certificates = []tls.Certificate{*cert}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}}
	}
	base := "https://" + addr
	if code, challenge, err := get(t, client(nil), http.MethodGet, base+"/metrics"); err != nil || code != http.StatusUnauthorized || challenge == "" {
		t.Errorf("GET /metrics without a client certificate: %d %q %v, want 401 with a challenge", code, challenge, err)
	}
	if code, _, err := get(t, client(&p.client), http.MethodGet, base+"/metrics"); err != nil || code != http.StatusOK {
		t.Errorf("GET /metrics with the client certificate: %d %v, want 200", code, err)
	}
	// A client offers only a certificate of a CA the server names: this one
	// goes without, and gets 401.
	if code, _, err := get(t, client(&p.stranger), http.MethodGet, base+"/metrics"); err == nil && code != http.StatusUnauthorized {
		t.Errorf("GET /metrics with a certificate another CA signed: %d, want 401 or no connection", code)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _, err := get(t, client(nil), http.MethodGet, base+path); err != nil || code != http.StatusOK {
			t.Errorf("GET %s without a certificate: %d %v, want 200", path, code, err)
		}
	}
	if code, _, err := get(t, &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, http.MethodGet, "http://"+addr+"/metrics"); err == nil && code == http.StatusOK {
		t.Error("the admin listener served plain HTTP with admin-tls-cert")
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if answer, err := Ready(ctx, addr); err != nil || answer != "ready" {
		t.Errorf("Ready over HTTPS: %q, %v", answer, err)
	}
}

// TestAdminAuthMistakes: the admin listener's settings that do not go
// together, and files that cannot be used, are ConfigErrors naming them.
func TestAdminAuthMistakes(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	writeFile(t, empty, "\n")
	for _, tc := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"cert without key", func(c *Config) { c.AdminTLSCert = "x.pem" }, "admin-tls-cert and admin-tls-key go together"},
		{"client CA alone", func(c *Config) { c.AdminClientCA = "ca.pem" }, "admin-client-ca needs admin-tls-cert and admin-tls-key"},
		{"empty token file", func(c *Config) { c.AdminTokenFile = empty }, "admin-token-file: no token"},
		{"no token file", func(c *Config) { c.AdminTokenFile = filepath.Join(dir, "none") }, "admin-token-file"},
		{"record limits without record", func(c *Config) { c.RecordSample = 0.5 }, "go with record"},
		{"sample past 1", func(c *Config) { c.Record, c.RecordSample = filepath.Join(dir, "r.rec"), 2 }, "record-sample is 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.set(&cfg)
			_, err := New(cfg)
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want a ConfigError with %q", err, tc.want)
			}
		})
	}
}
