package reactor_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// The suite over TLS: with RPCD_TEST_TLS=1, start, dial and dialRaw serve
// and connect over TLS (the standard library transport), and
// TestSuiteOverTLS runs the end-to-end tests again that way.

var overTLS = os.Getenv("RPCD_TEST_TLS") == "1"

// testPKI is a certificate authority, a server certificate for 127.0.0.1
// and a client certificate, made once per test process.
type testPKI struct {
	pool   *x509.CertPool
	server tls.Certificate
	client tls.Certificate
}

var (
	pkiOnce sync.Once
	pki     testPKI
)

func thePKI(t testing.TB) testPKI {
	pkiOnce.Do(func() {
		caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		caTmpl := &x509.Certificate{
			SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rpcd test CA"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		}
		caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
		if err != nil {
			panic(err)
		}
		ca, _ := x509.ParseCertificate(caDER)
		pki.pool = x509.NewCertPool()
		pki.pool.AddCert(ca)
		leaf := func(serial int64, name pkix.Name, usage x509.ExtKeyUsage, ips []net.IP) tls.Certificate {
			key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			tmpl := &x509.Certificate{
				SerialNumber: big.NewInt(serial), Subject: name, IPAddresses: ips,
				NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
				KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			}
			der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
			if err != nil {
				panic(err)
			}
			return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
		}
		pki.server = leaf(2, pkix.Name{CommonName: "rpcd test server"}, x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
		pki.client = leaf(3, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"admin"}}, x509.ExtKeyUsageClientAuth, nil)
	})
	return pki
}

// serverTLS asks for client certificates and verifies those it gets.
func serverTLS(t testing.TB) *tls.Config {
	p := thePKI(t)
	return &tls.Config{Certificates: []tls.Certificate{p.server}, ClientCAs: p.pool, ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS13}
}

// clientTLS trusts the test CA; with cert, it presents the client
// certificate.
func clientTLS(t testing.TB, cert bool) *tls.Config {
	p := thePKI(t)
	cfg := &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS13}
	if cert {
		cfg.Certificates = []tls.Certificate{p.client}
	}
	return cfg
}

// TestSuiteOverTLS runs the end-to-end suite again with the server on the
// standard library transport over TLS and the clients dialling TLS.
func TestSuiteOverTLS(t *testing.T) {
	if overTLS || overStd {
		t.Skip("already over another transport")
	}
	if testing.Short() {
		t.Skip("the suite over TLS runs in a process of its own")
	}
	suite := []string{
		"TestBuiltinRoutes", "TestManyCallers", "TestLargePayloads", "TestEveryErrorCode",
		"TestUnknownRouteAndBadArguments", "TestHandlerPanic", "TestCallContext",
		"TestClientCancelReachesHandler", "TestDeadlineExceeded", "TestBlockingInflightLimit",
		"TestNotify", "TestFutures", "TestPipelinedRequests", "TestBadPeerIsolated",
		"TestShutdownAnswersCallsInFlight", "TestShutdownTimeout", "TestShutdownUnderLoad",
		"TestFrameTimeout", "TestIdleTimeout", "TestKeepAlive", "TestMaxConns", "TestMaxConnAge",
		"TestCancelFloodBounded", "TestReplyToGoneClient", "TestAuthentication", "TestAuthorization",
		"TestReverseCall", "TestReverseCallRules", "TestPushToAll", "TestPushToSlowClient",
		"TestPubSub", "TestPubSubFanOut", "TestPubSubLimits",
		"TestClientCredentials", "TestStatsCounts", "TestStatsRefusedAndSlow",
		"TestStreamUpload", "TestStreamDownload", "TestStreamBothWays", "TestStreamFlowControl",
		"TestStreamWindowEnforced", "TestStreamRawRules", "TestStreamCancel", "TestStreamConnectionLoss",
		"TestStreamShutdown", "TestStreamsManyAtOnce", "TestStreamMaxStreams", "TestStreamFromServer",
		"TestStreamMiddleware", "TestCompression", "TestCompressionNotAsked", "TestCompressionRefused", "TestCompressionWithCredentials",
		"TestStreamCompression", "TestStreamCompressionRaw", "TestPubSubCompression", "TestPeerCodec",
		"TestPipelinedReaderNotCut", "TestHalfCloseAnswersAll", "TestClosedPeerCancelsCalls", "TestGoAwayOutlivesUnreadInput",
		"TestFrameOutcomes", "TestNoCallsToAPeerGoingAway",
		"TestTopicPermissions", "TestTopicRefusalsOnTheWire", "TestTopicsWithoutIdentity",
		"TestInlineHandlerCallingOut",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^("+strings.Join(suite, "|")+")$", "-test.v")
	cmd.Env = append(os.Environ(), "RPCD_TEST_TLS=1")
	out, err := cmd.CombinedOutput()
	passed := len(topPassed.FindAll(out, -1))
	if err != nil || passed < len(suite) {
		t.Fatalf("the suite over TLS: %v; %d of %d tests passed\n%s", err, passed, len(suite), out)
	}
	t.Logf("%d tests passed over TLS", passed)
}

// TestMutualTLS: a client certificate the server verifies becomes the
// connection's identity; a client without one is served without one; a
// client that does not trust the server, or speaks plain TCP, is not
// served.
func TestMutualTLS(t *testing.T) {
	reg := handler.NewRegistry()
	builtin.Register(reg)
	reg.HandleFunc("Who/Am", func(ctx context.Context, _, reply []byte) ([]byte, error) {
		id := handler.CallFrom(ctx).Identity
		if id == nil {
			return append(reply, "nobody"...), nil
		}
		return append(reply, id.Subject+"/"+id.Method+"/"+strings.Join(id.Roles, ",")...), nil
	})
	s := reactor.New(reg, reactor.Options{TLS: serverTLS(t)})
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	addr := s.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		cert bool
		want string
	}{{true, "alice/tls/admin"}, {false, "nobody"}} {
		c, err := client.Dial(ctx, addr, client.Options{TLS: clientTLS(t, tc.cert)})
		if err != nil {
			t.Fatal(err)
		}
		reply, err := c.CallRaw(ctx, "Who/Am", nil, nil)
		c.Close()
		if err != nil || string(reply) != tc.want {
			t.Fatalf("client certificate %v: %q, %v; want %q", tc.cert, reply, err, tc.want)
		}
	}
	// A client that does not trust the server's certificate.
	if c, err := client.Dial(ctx, addr, client.Options{TLS: &tls.Config{MinVersion: tls.VersionTLS13}}); err == nil {
		c.Close()
		t.Fatal("a client that does not trust the server connected")
	}
	// Plain TCP to a TLS server: the handshake fails and the connection
	// closes; nothing is served.
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.Write(proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, builtin.EchoPacket, nil, []byte("x")))
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 256)
	n, _ := nc.Read(buf)
	if _, k, err := proto.Decode(buf[:n], nil); err == nil && k > 0 {
		t.Fatal("a plain TCP client was answered in rpcd frames by a TLS server")
	}
}
