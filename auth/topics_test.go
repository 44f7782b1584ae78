package auth_test

import (
	"strings"
	"testing"

	"github.com/rpcd/rpcd/auth"
	"github.com/rpcd/rpcd/handler"
)

// payrollRules: writers publish orders, readers read them, ops read
// everything but the secrets, admins have the secrets, and every
// connection may publish and read chat.
func payrollRules(t *testing.T) *auth.TopicPermissions {
	t.Helper()
	p, err := auth.Topics(map[string]auth.TopicRules{
		"writer": {Publish: auth.TopicList{Allow: []string{"orders.>"}}},
		"reader": {Subscribe: auth.TopicList{Allow: []string{"orders.>"}, Deny: []string{"orders.internal.>"}}},
		"ops":    {Subscribe: auth.TopicList{Allow: []string{">"}, Deny: []string{"secrets.>"}}},
		"admin":  {Publish: auth.TopicList{Allow: []string{"secrets.>"}}, Subscribe: auth.TopicList{Allow: []string{"secrets.>"}}},
		auth.EveryRole: {
			Publish:   auth.TopicList{Allow: []string{"chat.*"}},
			Subscribe: auth.TopicList{Allow: []string{"chat.*"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTopics: a connection has the rules of its roles and of "*" together;
// a deny of any of its roles wins over an allow of another; a connection
// without an identity has "*"'s alone.
func TestTopics(t *testing.T) {
	p := payrollRules(t)
	who := func(roles ...string) *handler.Identity { return &handler.Identity{Subject: "someone", Roles: roles} }
	for _, tc := range []struct {
		name string
		id   *handler.Identity
		pub  map[string]bool // topic: may publish
		sub  map[string]bool // pattern: may subscribe
	}{
		{"reader", who("reader"),
			map[string]bool{"orders.eu.created": false, "chat.lobby": true, "secrets.payroll": false},
			map[string]bool{"orders.>": false, "orders.eu.>": true, "orders.*.created": false /* orders.internal.created */, "orders.eu.created": true, "orders.internal.x": false,
				"secrets.>": false, "secrets.payroll": false, ">": false, "chat.*": true, "chat.>": false}},
		{"writer", who("writer"),
			map[string]bool{"orders.eu.created": true, "orders": false, "secrets.payroll": false},
			map[string]bool{"orders.>": false, "chat.lobby": true}},
		{"admin", who("admin"),
			map[string]bool{"secrets.payroll": true, "orders.eu": false},
			map[string]bool{"secrets.>": true, "secrets.*": true, ">": false}},
		{"ops: everything but the secrets", who("ops"),
			map[string]bool{"orders.eu": false},
			map[string]bool{">": false, "orders.>": true, "*.payroll": false, "orders.*": true, "secrets": true}},
		{"ops and admin: ops' deny wins", who("ops", "admin"),
			map[string]bool{"secrets.payroll": true},
			map[string]bool{"secrets.>": false, "secrets.payroll": false, "orders.>": true}},
		{"reader and writer", who("reader", "writer", "reader"),
			map[string]bool{"orders.eu.created": true},
			map[string]bool{"orders.eu.>": true, "orders.>": false}},
		{"a role without rules", who("nobody"),
			map[string]bool{"orders.eu": false, "chat.lobby": true},
			map[string]bool{"chat.*": true, "chat.lobby.x": false}},
		{"no identity", nil,
			map[string]bool{"orders.eu": false, "chat.lobby": true},
			map[string]bool{"chat.*": true, ">": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := p.Access(tc.id)
			for topic, want := range tc.pub {
				if got := a.MayPublish([]byte(topic)); got != want {
					t.Errorf("MayPublish(%s) = %v, want %v", topic, got, want)
				}
			}
			for pattern, want := range tc.sub {
				if got := a.MaySubscribe([]byte(pattern)); got != want {
					t.Errorf("MaySubscribe(%s) = %v, want %v", pattern, got, want)
				}
			}
		})
	}

	none, err := auth.Topics(nil)
	if err != nil {
		t.Fatal(err)
	}
	if a := none.Access(who("admin")); a.MayPublish([]byte("a")) || a.MaySubscribe([]byte("a")) {
		t.Fatal("no rules at all allowed something")
	}
}

func TestTopicsRefusesBadPatterns(t *testing.T) {
	for _, tc := range []struct {
		rules auth.TopicRules
		want  string
	}{
		{auth.TopicRules{Publish: auth.TopicList{Allow: []string{"orders..x"}}}, `role r, publish allow pattern "orders..x": empty token in pattern`},
		{auth.TopicRules{Subscribe: auth.TopicList{Deny: []string{"a.>.b"}}}, `subscribe deny pattern "a.>.b": '>' before the last token`},
		{auth.TopicRules{Publish: auth.TopicList{Deny: []string{""}}}, "empty pattern"},
	} {
		if _, err := auth.Topics(map[string]auth.TopicRules{"r": tc.rules}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.rules, err, tc.want)
		}
	}
}

// TestTopicLabels: a refusal's label is a first token the rules name, a
// wildcard, or "other": never more of what a client sent.
func TestTopicLabels(t *testing.T) {
	p := payrollRules(t)
	for in, want := range map[string]string{
		"orders.eu.created": "orders", "secrets": "secrets", ">": ">", "*.payroll": "*",
		"chat.lobby": "chat", "made.up.by.a.client": "other", "orders-x": "other",
	} {
		if got := p.Label([]byte(in)); got != want {
			t.Errorf("Label(%s) = %q, want %q", in, got, want)
		}
	}
}

// TestTopicAccessAllocs: deciding a publish or a subscription allocates
// nothing, allowed or refused.
func TestTopicAccessAllocs(t *testing.T) {
	p := payrollRules(t)
	a := p.Access(&handler.Identity{Roles: []string{"reader", "writer", "ops"}})
	topics := [][]byte{[]byte("orders.eu.created"), []byte("secrets.payroll")}
	patterns := [][]byte{[]byte("orders.*.>"), []byte(">"), []byte("orders.internal.*")}
	n := testing.AllocsPerRun(1000, func() {
		for _, topic := range topics {
			a.MayPublish(topic)
		}
		for _, pattern := range patterns {
			a.MaySubscribe(pattern)
		}
		p.Label(topics[0])
	})
	if n != 0 {
		t.Fatalf("%.1f allocations", n)
	}
}
