package proto

import (
	"strings"
	"testing"
)

// TestParsePair: "key=value" splits at its first '='; a pair that
// AppendMetadata would panic on is refused, saying why.
func TestParsePair(t *testing.T) {
	for _, tc := range []struct {
		in, key, value, err string
	}{
		{in: "tenant=acme", key: "tenant", value: "acme"},
		{in: "k=a=b", key: "k", value: "a=b"},
		{in: "empty=", key: "empty", value: ""},
		{in: "novalue", err: "is not key=value"},
		{in: "=v", err: "key"},
		{in: "bad key=v", err: "key"},
		{in: "k=" + strings.Repeat("v", 0x10000), err: "want at most 65535"},
	} {
		k, v, err := ParsePair(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%.20q: %v, want an error with %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || k != tc.key || v != tc.value {
			t.Errorf("%q: %q, %q, %v; want %q, %q", tc.in, k, v, err, tc.key, tc.value)
		}
	}
}
