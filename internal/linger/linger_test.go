package linger

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/rpcd/rpcd/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// bound is how long a test waits for what must happen; far past any
// expected time, it only keeps a broken Drain from hanging the test.
const bound = 10 * time.Second

// pair returns the two ends of a TCP connection on loopback.
func pair(t *testing.T) (server, peer net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		peer.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close(); peer.Close() })
	return server, peer
}

// drain runs Drain on a goroutine of its own, then closes nc; the channel
// closes when both are done.
func drain(nc net.Conn, d time.Duration, n int) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		Drain(nc, d, n)
		nc.Close()
	}()
	return done
}

// send writes junk to nc until it has written n bytes or a write fails.
func send(nc net.Conn, n int) <-chan error {
	errc := make(chan error, 1)
	go func() {
		junk := make([]byte, 32<<10)
		_ = nc.SetWriteDeadline(time.Now().Add(bound))
		for sent := 0; sent < n; sent += len(junk) {
			if _, err := nc.Write(junk); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	return errc
}

// readAll reads nc to its end, within bound.
func readAll(t *testing.T, nc net.Conn) ([]byte, error) {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(bound))
	return io.ReadAll(nc)
}

// TestDrainKeepsTheLastWords: a peer that sends 1 MiB the server never
// reads, and only then reads, gets the server's last words and then the
// end of the stream, not a reset; Drain returns once the peer closes,
// long before its time is up.
func TestDrainKeepsTheLastWords(t *testing.T) {
	for _, tc := range []struct {
		name string
		dial func(t *testing.T) (net.Conn, net.Conn)
	}{{"tcp", pair}, {"tls", tlsPair}} {
		t.Run(tc.name, func(t *testing.T) {
			server, peer := tc.dial(t)
			last := []byte("the GoAway that says why")
			if _, err := server.Write(last); err != nil {
				t.Fatal(err)
			}
			sent := send(peer, 1<<20)
			done := drain(server, time.Minute, DefaultBytes)
			if err := <-sent; err != nil {
				t.Fatalf("the peer's 1 MiB: %v; the server must read it while it lingers", err)
			}
			got, err := readAll(t, peer)
			if err != nil || !bytes.Equal(got, last) {
				t.Fatalf("the peer read %q, %v; want %q and the end", got, err, last)
			}
			peer.Close()
			select {
			case <-done:
			case <-time.After(bound):
				t.Fatalf("Drain still reading %v after the peer closed", bound)
			}
		})
	}
}

// TestDrainLimits: Drain stops reading after n bytes from a peer that
// keeps sending, and after d from one that sends nothing and stays.
func TestDrainLimits(t *testing.T) {
	t.Run("bytes", func(t *testing.T) {
		server, peer := pair(t)
		sent := send(peer, 1<<30) // far past the limit: fails once the server closes
		done := drain(server, time.Hour, 256<<10)
		select {
		case <-done:
		case <-time.After(bound):
			t.Fatalf("Drain of at most 256 KiB still reading after %v from a peer that keeps sending", bound)
		}
		if err := <-sent; err == nil {
			t.Fatal("the peer sent 1 GiB to a server that lingers for 256 KiB")
		}
	})
	t.Run("time", func(t *testing.T) {
		server, _ := pair(t)
		select {
		case <-drain(server, 50*time.Millisecond, DefaultBytes):
		case <-time.After(bound):
			t.Fatalf("Drain of at most 50ms still reading after %v from a silent peer", bound)
		}
	})
}

// TestDrainWithoutCloseWrite: a connection without a write side of its own
// to shut down (net.Pipe) is not read: Drain returns at once, and the
// peer's pending write is not taken.
func TestDrainWithoutCloseWrite(t *testing.T) {
	server, peer := net.Pipe()
	defer peer.Close()
	written := make(chan error, 1)
	go func() {
		_, err := peer.Write([]byte("unread"))
		written <- err
	}()
	select {
	case <-drain(server, time.Hour, DefaultBytes):
	case <-time.After(bound):
		t.Fatalf("Drain of a net.Pipe still running after %v", bound)
	}
	if err := <-written; !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("the peer's write: %v, want io.ErrClosedPipe (nothing read)", err)
	}
}

// tlsPair returns the two ends of a TLS connection on loopback, its
// handshake done, with a certificate made for the test.
func tlsPair(t *testing.T) (server, peer net.Conn) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rpcd linger test"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	s, p := pair(t)
	ts := tls.Server(s, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
	tp := tls.Client(p, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	errc := make(chan error, 1)
	go func() { errc <- ts.Handshake() }()
	_ = tp.SetDeadline(time.Now().Add(bound))
	if err := tp.Handshake(); err != nil {
		t.Fatal(err)
	}
	_ = tp.SetDeadline(time.Time{})
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return ts, tp
}
