package gateway

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDocStatuses: the statuses docs/gateway.md says the OpenAPI document
// lists are the ones it lists, for calls (errorStatuses, but 405) and for
// JSON-RPC (jsonrpcStatuses).
func TestDocStatuses(t *testing.T) {
	b, err := os.ReadFile("../docs/gateway.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(string(b)), " ")
	var calls []string
	for _, e := range errorStatuses {
		calls = append(calls, strconv.Itoa(e.status))
	}
	var jsonrpc []string
	for _, s := range jsonrpcStatuses {
		jsonrpc = append(jsonrpc, strconv.Itoa(s))
	}
	for _, tc := range []struct {
		name, pattern string
		want          []string
	}{
		{"calls", `\*\*Every error status\*\* of the table above but 405 \(the document describes POST\): ([0-9, ]+), each`, calls},
		{"JSON-RPC", `the statuses it refuses a request with before any call \(([0-9, ]+)\)`, jsonrpc},
	} {
		m := regexp.MustCompile(tc.pattern).FindStringSubmatch(doc)
		if m == nil {
			t.Errorf("docs/gateway.md has no list of the OpenAPI document's statuses for %s (%s)", tc.name, tc.pattern)
			continue
		}
		if got, want := m[1], strings.Join(tc.want, ", "); got != want {
			t.Errorf("docs/gateway.md lists the document's statuses for %s as %s; the document has %s", tc.name, got, want)
		}
	}
}
