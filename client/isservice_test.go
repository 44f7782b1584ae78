package client_test

import (
	"testing"

	"github.com/rpcd/rpcd/client"
)

// TestIsService: a scheme other than tcp and unix names a service.
func TestIsService(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7070":            false,
		"tcp://127.0.0.1:7070":      false,
		"unix:///run/rpcd.sock":     false,
		"etcd://10.0.0.1:2379/echo": true,
		"dns:///echo.internal:7070": true,
		"static://a:1,b:2/svc":      true,
	} {
		if got := client.IsService(addr); got != want {
			t.Errorf("IsService(%q) = %v, want %v", addr, got, want)
		}
	}
}
