package daemon

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
)

// TestRegisterEtcdScheme: without EtcdAccess settings nothing is
// registered and nothing is refused; settings that do not go together,
// and a file that cannot be read, are ConfigErrors naming them. (rpcd
// call's and bench's tests reach a secured etcd through what it
// registers.)
func TestRegisterEtcdScheme(t *testing.T) {
	if err := (&Config{Etcd: "127.0.0.1:1", Service: "s"}).RegisterEtcdScheme(); err != nil {
		t.Errorf("no access settings: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "none")
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // the settings named
	}{
		{"cert without key", Config{EtcdCert: "c.pem"}, []string{"etcd-cert", "etcd-key"}},
		{"user without password", Config{EtcdUser: "u"}, []string{"etcd-user", "etcd-password-file"}},
		{"missing password file", Config{EtcdUser: "u", EtcdPasswordFile: missing}, []string{"etcd-password-file"}},
	} {
		var ce *ConfigError
		if err := tc.cfg.RegisterEtcdScheme(); !errors.As(err, &ce) {
			t.Errorf("%s: %v, want a ConfigError", tc.name, err)
		} else if got := ce.Settings(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q names %q, want %q", tc.name, err, got, tc.want)
		}
	}
}
