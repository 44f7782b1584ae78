package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testFiles are the certificates, keys and token files a secured serve and
// its clients are given.
type testFiles struct {
	ca, serverCert, serverKey, clientCert, clientKey string
	otherCA                                          string // a CA that signed nothing here
	tokens, hmacKey                                  string
}

// writeTestFiles writes a CA, a server certificate for 127.0.0.1 and a
// client certificate (CN alice, OU admin) signed by it, another CA, a token
// file and an HMAC key into a temporary directory.
func writeTestFiles(t *testing.T) testFiles {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pemOf := func(typ string, der []byte) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	newKey := func() (*ecdsa.PrivateKey, string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return key, pemOf("PRIVATE KEY", der)
	}
	newCA := func(name string) (*x509.Certificate, *ecdsa.PrivateKey, string) {
		key, _ := newKey()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		ca, _ := x509.ParseCertificate(der)
		return ca, key, pemOf("CERTIFICATE", der)
	}
	ca, caKey, caPEM := newCA("rpcd test CA")
	_, _, otherPEM := newCA("another CA")
	leaf := func(serial int64, name pkix.Name, usage x509.ExtKeyUsage, ips []net.IP) (string, string) {
		key, keyPEM := newKey()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: name, IPAddresses: ips,
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return pemOf("CERTIFICATE", der), keyPEM
	}
	serverCert, serverKey := leaf(2, pkix.Name{CommonName: "rpcd test server"}, x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	clientCert, clientKey := leaf(3, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"admin"}}, x509.ExtKeyUsageClientAuth, nil)
	return testFiles{
		ca:         write("ca.pem", caPEM),
		otherCA:    write("other-ca.pem", otherPEM),
		serverCert: write("server.pem", serverCert),
		serverKey:  write("server.key", serverKey),
		clientCert: write("client.pem", clientCert),
		clientKey:  write("client.key", clientKey),
		tokens:     write("tokens", "# token subject roles\nt-admin alice admin,reader\n\nt-reader bob reader\n"),
		hmacKey:    write("hmac.key", "0123456789abcdef0123456789abcdef\n"),
	}
}

// TestProcessSecurity runs `rpcd serve` with TLS, tokens, HMAC tokens and
// a role requirement, and `rpcd call`, `routes` and `bench` against it with
// the client's TLS and token flags.
func TestProcessSecurity(t *testing.T) {
	f := writeTestFiles(t)
	d := startServe(t, "-tls-cert", f.serverCert, "-tls-key", f.serverKey,
		"-auth-tokens", f.tokens, "-auth-hmac-key", f.hmacKey, "-auth-require", "Math/Sum=admin")
	a := d.addr
	if !strings.Contains(d.log.String(), "tls=true auth=true") {
		t.Errorf("the serving line does not say TLS and authentication are on:\n%s", d.log.String())
	}
	if log := d.log.String(); !strings.Contains(log, `transport="goroutine per connection"`) || strings.Contains(log, "loops=") {
		t.Errorf("the serving line reports event loops, which TLS does not use:\n%s", log)
	}

	signed := rpcd(t, "", "token", "-key", f.hmacKey, "-subject", "carol", "-roles", "admin", "-ttl", "1h")
	if signed.code != 0 || strings.Count(signed.stdout, ".") != 1 {
		t.Fatalf("rpcd token: exit status %d, stdout %q, stderr %q", signed.code, signed.stdout, signed.stderr)
	}
	readerToken := filepath.Join(t.TempDir(), "reader-token")
	if err := os.WriteFile(readerToken, []byte("t-reader\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secure := []string{"-addr", a, "-tls-ca", f.ca}
	with := func(args ...string) []string { return append(append([]string{"call"}, secure...), args...) }

	tests := []struct {
		name       string
		env        []string
		args       []string
		wantCode   int
		wantStdout string // exact, unless inStdout
		inStdout   bool
		wantStderr string // substring
	}{
		{name: "token", args: with("-token", "t-admin", "Math/Sum", `{"a":1,"b":2}`), wantStdout: "3\n"},
		{name: "token from the environment", env: []string{"RPCD_TOKEN=t-admin"}, args: with("Math/Sum", `{"a":2,"b":2}`), wantStdout: "4\n"},
		{name: "token file", args: with("-token-file", readerToken, "Sys/Ping"), wantStdout: "\"pong\"\n"},
		{name: "hmac token", args: with("-auth-method", "hmac", "-token", strings.TrimSpace(signed.stdout), "Math/Sum", `{"a":3,"b":4}`), wantStdout: "7\n"},
		{name: "role missing", args: with("-token-file", readerToken, "Math/Sum", `{"a":1,"b":2}`),
			wantCode: 1, wantStderr: "rpcd: permission denied"},
		{name: "no token", args: with("Sys/Ping"), wantCode: 1, wantStderr: "rpcd: unauthenticated"},
		{name: "wrong token", args: with("-token", "guess", "Sys/Ping"), wantCode: 1, wantStderr: "rpcd: unauthenticated"},
		{name: "token as the wrong method", args: with("-auth-method", "hmac", "-token", "t-admin", "Sys/Ping"), wantCode: 1, wantStderr: "rpcd: unauthenticated"},
		{name: "untrusted server", args: []string{"call", "-addr", a, "-tls-ca", f.otherCA, "-token", "t-admin", "Sys/Ping"},
			wantCode: 1, wantStderr: "certificate signed by unknown authority"},
		{name: "wrong server name", args: with("-tls-server-name", "example.com", "-token", "t-admin", "Sys/Ping"),
			wantCode: 1, wantStderr: "example.com"},
		{name: "plain tcp to a TLS server", args: []string{"call", "-addr", a, "-timeout", "2s", "-token", "t-admin", "Sys/Ping"},
			wantCode: 1, wantStderr: "rpcd: unavailable"},
		{name: "token and token file", args: with("-token", "x", "-token-file", readerToken, "Sys/Ping"), wantCode: exitUsage, wantStderr: "give one"},
		{name: "unknown method", args: with("-auth-method", "kerberos", "-token", "x", "Sys/Ping"), wantCode: exitUsage, wantStderr: "want token or hmac"},
		{name: "cert without key", args: with("-tls-cert", f.clientCert, "Sys/Ping"), wantCode: exitUsage, wantStderr: "-tls-cert and -tls-key go together"},
		{name: "missing token file", args: with("-token-file", filepath.Join(t.TempDir(), "none"), "Sys/Ping"), wantCode: 1, wantStderr: "reading the token"},
		{name: "routes", args: append(append([]string{"routes"}, secure...), "-token", "t-reader"), wantStdout: "Bench/EchoPacket\n", inStdout: true},
		{name: "bench", args: append(append([]string{"bench"}, secure...), "-token", "t-reader", "-n", "200", "-warmup", "0", "-json"), wantStdout: `"calls": 200`, inStdout: true},
		{name: "bench child with a token", args: []string{"bench", "-token", "t", "-n", "1"}, wantCode: exitUsage, wantStderr: "go with -addr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rpcdEnv(t, tt.env, "", tt.args...)
			if r.code != tt.wantCode {
				t.Errorf("exit status %d, want %d; stderr:\n%s", r.code, tt.wantCode, r.stderr)
			}
			if tt.wantCode == 0 && r.stdout != tt.wantStdout && !(tt.inStdout && strings.Contains(r.stdout, tt.wantStdout)) {
				t.Errorf("stdout %q, want %q", r.stdout, tt.wantStdout)
			}
			if tt.wantCode != 0 && !strings.Contains(r.stderr, tt.wantStderr) {
				t.Errorf("stderr %q, want it to contain %q", r.stderr, tt.wantStderr)
			}
		})
	}
}

// TestProcessMutualTLS runs `rpcd serve` requiring client certificates and
// `rpcd call` with and without one; -auth-require authorizes by the
// certificate's OU.
func TestProcessMutualTLS(t *testing.T) {
	f := writeTestFiles(t)
	d := startServe(t, "-tls-cert", f.serverCert, "-tls-key", f.serverKey, "-tls-client-ca", f.ca, "-auth-require", "Math/Sum=admin")
	base := []string{"call", "-addr", d.addr, "-tls-ca", f.ca, "-timeout", "3s"}
	r := rpcd(t, "", append(base, "-tls-cert", f.clientCert, "-tls-key", f.clientKey, "Math/Sum", `{"a":20,"b":22}`)...)
	if r.code != 0 || r.stdout != "42\n" {
		t.Errorf("with a client certificate: exit status %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = rpcd(t, "", append(base, "Sys/Ping")...)
	if r.code != 1 || !strings.Contains(r.stderr, "rpcd: unavailable") {
		t.Errorf("without a client certificate: exit status %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestServeSecurityUsage checks serve's security flags that cannot work,
// and files they name that cannot be used: each a mistake (exit status 78).
func TestServeSecurityUsage(t *testing.T) {
	f := writeTestFiles(t)
	short := filepath.Join(t.TempDir(), "short.key")
	if err := os.WriteFile(short, []byte("too short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-tls-cert", f.serverCert}, exitUsage, "-tls-cert and -tls-key go together"},
		{[]string{"-tls-client-ca", f.ca}, exitUsage, "-tls-client-ca needs -tls-cert"},
		{[]string{"-auth-require", "Math/Sum=admin"}, exitUsage, "-auth-require needs a way to authenticate"},
		{[]string{"-auth-tokens", f.tokens, "-auth-require", "Math/Sum"}, exitUsage, "is not ROUTE=ROLE"},
		{[]string{"-tls-cert", f.serverCert, "-tls-key", f.serverCert}, exitUsage, "loading the TLS certificate"},
		{[]string{"-auth-hmac-key", short}, exitUsage, "want at least 16"},
		{[]string{"-auth-tokens", f.hmacKey}, exitUsage, "want TOKEN SUBJECT"},
	} {
		r := rpcd(t, "", append([]string{"serve", "-addr", "127.0.0.1:0"}, tt.args...)...)
		if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("serve %q: exit status %d, stderr %q; want %d and %q", tt.args, r.code, r.stderr, tt.code, tt.want)
		}
	}
}
