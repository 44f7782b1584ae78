// Package etcdtest starts a real etcd server inside a test process, on
// loopback with a temporary data directory, for the tests of service
// discovery. Only tests import it: rpcd's commands and packages never
// link the etcd server (TestNoEtcdServerInBinary in cmd/rpcd checks).
package etcdtest

import (
	"net/url"
	"testing"
	"time"

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
	cfg := embed.NewConfig()
	cfg.Name = "rpcd-test"
	cfg.Dir = t.TempDir()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	loop := func() []url.URL { return []url.URL{{Scheme: "http", Host: "127.0.0.1:0"}} }
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = loop(), loop()
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = loop(), loop()
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("etcd: %v", err)
	}
	t.Cleanup(func() {
		e.Close()
		<-e.Server.StopNotify()
	})
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("etcd: %v", err)
	case <-time.After(startTimeout):
		e.Server.Stop()
		t.Fatalf("etcd not ready within %v", startTimeout)
	}
	return e.Clients[0].Addr().String()
}
