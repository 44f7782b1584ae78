// Package etcdtest starts a real etcd server inside a test process, on
// loopback with a temporary data directory, for the tests of service
// discovery. Only tests import it: rpcd's commands and packages never
// link the etcd server (TestNoEtcdServerInBinary in cmd/rpcd checks).
package etcdtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// startTimeout bounds how long the server has to become ready.
const startTimeout = 30 * time.Second

// Start runs an etcd server on loopback ports the system picks, with its
// data in a directory of t's, until t ends, and returns its client
// endpoint ("127.0.0.1:port").
func Start(t testing.TB) string {
	t.Helper()
	return start(t, embed.NewConfig(), "http")
}

// Secure is a secured etcd's: certificate files (PEM) and a user.
type Secure struct {
	Endpoint string // 127.0.0.1:port, serving TLS only

	CA                    string // signed etcd's certificate and the client's
	ClientCert, ClientKey string // a certificate etcd accepts (its common name is no user)
	OtherCA               string // a CA that signed neither

	// User may read and write /rpcd/services/ and nothing else (what
	// docs/scale-out.md asks of it); Password is its.
	User, Password string
}

// StartSecure runs an etcd server as Start does, but serving TLS only,
// requiring a client certificate signed by its CA, and with
// authentication enabled: a root user and User, whose role may read and
// write the keys under /rpcd/services/.
func StartSecure(t testing.TB) Secure {
	t.Helper()
	dir := t.TempDir()
	ca, caKey, caFile := newCA(t, dir, "ca", "etcdtest CA")
	_, _, otherFile := newCA(t, dir, "other-ca", "another CA")
	s := Secure{CA: caFile, OtherCA: otherFile, User: "rpcd", Password: "rpcd-secret"}
	serverCert, serverKey := leaf(t, dir, "server", ca, caKey, x509.ExtKeyUsageServerAuth)
	s.ClientCert, s.ClientKey = leaf(t, dir, "client", ca, caKey, x509.ExtKeyUsageClientAuth)

	const services = "/rpcd/services/" // discovery/etcd.Prefix
	cfg := embed.NewConfig()
	cfg.ClientTLSInfo = transport.TLSInfo{CertFile: serverCert, KeyFile: serverKey, TrustedCAFile: caFile, ClientCertAuth: true}
	s.Endpoint = start(t, cfg, "https")

	tlsCfg, err := transport.TLSInfo{CertFile: s.ClientCert, KeyFile: s.ClientKey, TrustedCAFile: caFile}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint}, TLS: tlsCfg, DialTimeout: startTimeout, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	steps := []func() error{
		func() error { _, err := cli.RoleAdd(ctx, "root"); return err },
		func() error { _, err := cli.UserAdd(ctx, "root", "root-secret"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "rpcd"); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, "rpcd", services, clientv3.GetPrefixRangeEnd(services), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, s.User, s.Password); return err },
		func() error { _, err := cli.UserGrantRole(ctx, s.User, "rpcd"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("etcd: setting up authentication: %v", err)
		}
	}
	return s
}

func start(t testing.TB, cfg *embed.Config, clientScheme string) string {
	t.Helper()
	return startServer(t, cfg, clientScheme).Endpoint
}

// Server is an etcd server embedded in a test that can be stopped and
// started again, as an outage of etcd: its data directory and its ports
// stay the same, so its clients find it again, with its keys and leases.
type Server struct {
	// Endpoint is the client endpoint, 127.0.0.1:port, the same across
	// restarts.
	Endpoint string

	t   testing.TB
	cfg *embed.Config

	mu sync.Mutex
	e  *embed.Etcd // nil while stopped
}

// StartServer runs an etcd server as Start does and returns it, for a
// test that stops and starts it again (Stop, Restart). It is stopped
// when t ends.
func StartServer(t testing.TB) *Server {
	t.Helper()
	return startServer(t, embed.NewConfig(), "http")
}

func startServer(t testing.TB, cfg *embed.Config, clientScheme string) *Server {
	t.Helper()
	cfg.Name = "rpcd-test"
	cfg.Dir = t.TempDir()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	loop := func(scheme string) []url.URL { return []url.URL{{Scheme: scheme, Host: "127.0.0.1:0"}} }
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = loop(clientScheme), loop(clientScheme)
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = loop("http"), loop("http")
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	s := &Server{t: t, cfg: cfg}
	t.Cleanup(s.Stop)
	s.run()
	// Later starts bind the ports this one was given.
	client := url.URL{Scheme: clientScheme, Host: s.e.Clients[0].Addr().String()}
	peer := url.URL{Scheme: "http", Host: s.e.Peers[0].Addr().String()}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	s.Endpoint = client.Host
	return s
}

// run starts the server and waits until it is ready.
func (s *Server) run() {
	s.t.Helper()
	e, err := embed.StartEtcd(s.cfg)
	if err != nil {
		s.t.Fatalf("etcd: %v", err)
	}
	s.mu.Lock()
	s.e = e
	s.mu.Unlock()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		s.t.Fatalf("etcd: %v", err)
	case <-time.After(startTimeout):
		e.Server.Stop()
		s.t.Fatalf("etcd not ready within %v", startTimeout)
	}
}

// Stop stops the server, as a crash or a shutdown of etcd would: its
// clients' connections break and its ports refuse. It may be called when
// stopped.
func (s *Server) Stop() {
	s.mu.Lock()
	e := s.e
	s.e = nil
	s.mu.Unlock()
	if e != nil {
		e.Close()
		<-e.Server.StopNotify()
	}
}

// Restart starts a stopped server again on the same ports and data, and
// returns once it serves (it has elected itself leader); a lease it held
// when it stopped is alive again, for its TTL, from then, as etcd revives
// leases when a leader takes office.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	running := s.e != nil
	s.mu.Unlock()
	if running {
		s.t.Fatal("etcdtest: Restart of a server that runs")
	}
	s.run()
}

// newCA writes a self-signed CA certificate to dir/name.pem and returns
// it, its key and the file.
func newCA(t testing.TB, dir, name, cn string) (*x509.Certificate, *ecdsa.PrivateKey, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key, writePEM(t, dir, name+".pem", "CERTIFICATE", der)
}

// leaf writes a certificate for 127.0.0.1 signed by ca, and its key, to
// dir/name.pem and dir/name.key, and returns the files.
func leaf(t testing.TB, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, usage x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "etcdtest " + name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return writePEM(t, dir, name+".pem", "CERTIFICATE", der), writePEM(t, dir, name+".key", "PRIVATE KEY", keyDER)
}

func writePEM(t testing.TB, dir, name, kind string, der []byte) string {
	t.Helper()
	file := filepath.Join(dir, name)
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}
