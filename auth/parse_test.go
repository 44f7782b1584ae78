package auth_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rpcd/rpcd/auth"
)

// TestParseTopicRules: rules in a text as rpcd serve's auth-topics takes
// them, each rule's mistakes named.
func TestParseTopicRules(t *testing.T) {
	for _, tc := range []struct {
		flag string
		want map[string]auth.TopicRules
		err  string
	}{
		{"", nil, ""},
		{"pub:orders.>=writer;sub:orders.>=reader|ops", map[string]auth.TopicRules{
			"writer": {Publish: auth.TopicList{Allow: []string{"orders.>"}}},
			"reader": {Subscribe: auth.TopicList{Allow: []string{"orders.>"}}},
			"ops":    {Subscribe: auth.TopicList{Allow: []string{"orders.>"}}},
		}, ""},
		{"\n  sub:>=ops\n  deny-sub:secrets.>=ops\n  deny-pub:a=b:c=*\n", map[string]auth.TopicRules{ // a pattern may hold '=' and ':'
			"ops": {Subscribe: auth.TopicList{Allow: []string{">"}, Deny: []string{"secrets.>"}}},
			"*":   {Publish: auth.TopicList{Deny: []string{"a=b:c"}}},
		}, ""},
		{"pub:orders.>", nil, `rule "pub:orders.>" is not ACTION:PATTERN=ROLE`},
		{"pub:=writer", nil, "is not ACTION:PATTERN=ROLE"},
		{"pub:orders.>=", nil, "is not ACTION:PATTERN=ROLE"},
		{"publish:orders.>=writer", nil, `action "publish", want pub, sub, deny-pub or deny-sub`},
		{"pub:orders..x=writer", nil, "empty token in pattern"},
		{"sub:a.>.b=reader", nil, "'>' before the last token"},
		{"pub:orders.>=writer||ops", nil, "an empty role"},
		{" ; ;", nil, "no topic rule"},
	} {
		got, err := auth.ParseTopicRules(tc.flag)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error with %q", tc.flag, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %+v, %v; want %+v", tc.flag, got, err, tc.want)
		}
	}
}

// TestParseRoles: "ROUTE=ROLE[|ROLE...],..."; an item without a route or
// roles is refused, naming it.
func TestParseRoles(t *testing.T) {
	got, err := auth.ParseRoles("Math/Sum=admin,Admin/Drop=admin|ops")
	if want := map[string][]string{"Math/Sum": {"admin"}, "Admin/Drop": {"admin", "ops"}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("%v, %v; want %v", got, err, want)
	}
	if got, err := auth.ParseRoles(""); got != nil || err != nil {
		t.Errorf("empty: %v, %v; want nil, nil", got, err)
	}
	for _, text := range []string{"Math/Sum", "=admin", "Math/Sum=", "Math/Sum=admin,"} {
		if _, err := auth.ParseRoles(text); err == nil || !strings.Contains(err.Error(), "is not ROUTE=ROLE[|ROLE...]") {
			t.Errorf("%q: %v, want an item refused", text, err)
		}
	}
}

// TestReadTokens: a token file's lines, comments and blank lines skipped;
// a bad line is named by file and line, and a file of no token refused.
func TestReadTokens(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	got, err := auth.ReadTokens(write("ok", "# token subject roles\nt-admin alice admin,reader\n\nt-reader bob\n"))
	want := auth.Tokens{"t-admin": {Subject: "alice", Roles: []string{"admin", "reader"}}, "t-reader": {Subject: "bob"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("%v, %v; want %v", got, err, want)
	}
	bad := write("bad", "t-admin alice admin\nlonely\n")
	for file, msg := range map[string]string{bad: bad + ":2: want TOKEN SUBJECT", write("empty", "# none\n"): "no token in", filepath.Join(dir, "missing"): "reading tokens: open"} {
		if _, err := auth.ReadTokens(file); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want an error with %q", file, err, msg)
		}
	}
}

// TestReadHMACKey: the file's bytes but trailing white space, at least 16.
func TestReadHMACKey(t *testing.T) {
	dir := t.TempDir()
	key, short := filepath.Join(dir, "key"), filepath.Join(dir, "short")
	_ = os.WriteFile(key, []byte("0123456789abcdef0123\n"), 0o600)
	_ = os.WriteFile(short, []byte("too short \n"), 0o600)
	if got, err := auth.ReadHMACKey(key); err != nil || string(got) != "0123456789abcdef0123" {
		t.Errorf("%q, %v", got, err)
	}
	if _, err := auth.ReadHMACKey(short); err == nil || !strings.Contains(err.Error(), "has 9 bytes, want at least 16") {
		t.Errorf("a short key: %v", err)
	}
}
