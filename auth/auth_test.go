package auth_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpcd/rpcd/auth"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

func TestTokens(t *testing.T) {
	a := auth.Tokens{
		"s3cret-alice": {Subject: "alice", Roles: []string{"admin"}},
		"s3cret-bob":   {Subject: "bob"},
	}
	ctx := context.Background()
	id, err := a.Authenticate(ctx, "token", []byte("s3cret-alice"))
	if err != nil || id.Subject != "alice" || id.Method != "token" || !id.HasRole("admin") {
		t.Fatalf("alice's token: %+v, %v", id, err)
	}
	if id, err := a.Authenticate(ctx, "", []byte("s3cret-bob")); err != nil || id.Subject != "bob" {
		t.Fatalf("bob's token without a method: %+v, %v", id, err)
	}
	for _, bad := range []struct{ method, cred string }{
		{"token", "s3cret"}, {"token", "s3cret-alice "}, {"token", ""}, {"hmac", "s3cret-alice"},
	} {
		if _, err := a.Authenticate(ctx, bad.method, []byte(bad.cred)); !errors.Is(err, handler.ErrUnauthenticated) {
			t.Errorf("method %q, credentials %q: %v", bad.method, bad.cred, err)
		}
	}
	// The identity returned is a copy: a handler changing it changes no
	// other connection's.
	id.Roles = nil
	if again, _ := a.Authenticate(ctx, "token", []byte("s3cret-alice")); !again.HasRole("admin") {
		t.Fatal("an identity handed out shares the list's")
	}
}

func TestHMAC(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	h := auth.HMAC{Key: []byte("0123456789abcdef0123456789abcdef"), Now: func() time.Time { return now }}
	token := h.Sign(handler.Identity{Subject: "svc-orders", Roles: []string{"writer"}}, now.Add(time.Hour))
	ctx := context.Background()
	id, err := h.Authenticate(ctx, "hmac", []byte(token))
	if err != nil || id.Subject != "svc-orders" || id.Method != "hmac" || !id.HasRole("writer") {
		t.Fatalf("a good token: %+v, %v", id, err)
	}
	payload, sig, _ := strings.Cut(token, ".")
	tampered := []string{
		payload + "." + sig[:len(sig)-2] + "AA",
		strings.Replace(payload, "e", "f", 1) + "." + sig,
		payload,
		"",
		"a.b.c",
	}
	for _, bad := range tampered {
		if _, err := h.Authenticate(ctx, "hmac", []byte(bad)); !errors.Is(err, handler.ErrUnauthenticated) {
			t.Errorf("token %q accepted: %v", bad, err)
		}
	}
	other := auth.HMAC{Key: []byte("another key, another service....")}
	if _, err := other.Authenticate(ctx, "hmac", []byte(token)); err == nil {
		t.Error("a token signed with another key was accepted")
	}
	later := auth.HMAC{Key: h.Key, Now: func() time.Time { return now.Add(2 * time.Hour) }}
	if _, err := later.Authenticate(ctx, "hmac", []byte(token)); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("an expired token: %v", err)
	}
	if _, err := h.Authenticate(ctx, "token", []byte(token)); err == nil {
		t.Error("an HMAC token accepted under the method token")
	}
}

func TestAny(t *testing.T) {
	a := auth.Any{auth.Tokens{"t": {Subject: "one"}}, auth.HMAC{Key: []byte("k")}}
	if id, err := a.Authenticate(context.Background(), "", []byte("t")); err != nil || id.Subject != "one" {
		t.Fatalf("%+v, %v", id, err)
	}
	tok := auth.HMAC{Key: []byte("k")}.Sign(handler.Identity{Subject: "two"}, time.Now().Add(time.Minute))
	if id, err := a.Authenticate(context.Background(), "", []byte(tok)); err != nil || id.Subject != "two" {
		t.Fatalf("%+v, %v", id, err)
	}
	if _, err := a.Authenticate(context.Background(), "", []byte("nope")); err == nil {
		t.Fatal("refused by both, accepted by Any")
	}
}

func TestRequire(t *testing.T) {
	reg := handler.NewRegistry()
	reg.Use(auth.Require(auth.Roles(map[string][]string{"Admin/Drop": {"admin"}})))
	ran := 0
	ok := func(_ context.Context, _, reply []byte) ([]byte, error) { ran++; return append(reply, "ok"...), nil }
	reg.HandleFunc("Admin/Drop", ok)
	reg.HandleFunc("Open/Read", ok)
	call := func(route string, id *handler.Identity) error {
		_, err := reg.Lookup([]byte(route)).Serve(&handler.Call{Route: route, Identity: id}, nil, nil)
		return err
	}
	alice := &handler.Identity{Subject: "alice", Roles: []string{"admin"}}
	bob := &handler.Identity{Subject: "bob"}
	if err := call("Admin/Drop", alice); err != nil {
		t.Fatalf("admin calling an admin route: %v", err)
	}
	if err := call("Admin/Drop", bob); !errors.Is(err, handler.ErrPermissionDenied) || !handler.IsUnprocessed(err) {
		t.Fatalf("bob calling an admin route: %v", err)
	}
	if err := call("Open/Read", bob); err != nil {
		t.Fatalf("bob calling an open route: %v", err)
	}
	if err := call("Open/Read", nil); !errors.Is(err, handler.ErrUnauthenticated) {
		t.Fatalf("no identity: %v", err)
	}
	if ran != 2 {
		t.Fatalf("the handlers ran %d times, want 2", ran)
	}
	var e *handler.Error
	errors.As(call("Admin/Drop", bob), &e)
	if e.Code != proto.CodePermissionDenied || !strings.Contains(e.Message, "bob") {
		t.Fatalf("the refusal: %+v", e)
	}
}

// TestRequireFrom: each call is judged by the rules current returns then;
// with none, every call goes through, an unidentified one too.
func TestRequireFrom(t *testing.T) {
	var cur atomic.Pointer[func(*handler.Identity, string) bool]
	reg := handler.NewRegistry()
	reg.Use(auth.RequireFrom(func() func(*handler.Identity, string) bool {
		if p := cur.Load(); p != nil {
			return *p
		}
		return nil
	}))
	reg.HandleFunc("Admin/Drop", func(_ context.Context, _, reply []byte) ([]byte, error) { return reply, nil })
	call := func(id *handler.Identity) error {
		_, err := reg.Lookup([]byte("Admin/Drop")).Serve(&handler.Call{Route: "Admin/Drop", Identity: id}, nil, nil)
		return err
	}
	bob := &handler.Identity{Subject: "bob"}
	if err := call(nil); err != nil {
		t.Fatalf("no rules, no identity: %v", err)
	}
	adminOnly := auth.Roles(map[string][]string{"Admin/Drop": {"admin"}})
	cur.Store(&adminOnly)
	if err := call(bob); !errors.Is(err, handler.ErrPermissionDenied) || !handler.IsUnprocessed(err) {
		t.Fatalf("bob under the admin rule: %v", err)
	}
	if err := call(nil); !errors.Is(err, handler.ErrUnauthenticated) {
		t.Fatalf("no identity under the admin rule: %v", err)
	}
	open := auth.Roles(map[string][]string{"Admin/Drop": {"admin", "ops"}, "X/Y": {"admin"}})
	bob.Roles = []string{"ops"}
	cur.Store(&open)
	if err := call(bob); err != nil {
		t.Fatalf("bob, of ops, once ops may: %v", err)
	}
	cur.Store(nil)
	if err := call(nil); err != nil {
		t.Fatalf("the rules removed, no identity: %v", err)
	}
}
