package reactor_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpcd/rpcd/auth"
	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/reactor"
)

// whoRegistry serves Who/Am, which answers with the caller's subject and
// counts its runs.
func whoRegistry(ran *atomic.Int64) *handler.Registry {
	reg := handler.NewRegistry()
	reg.HandleFunc("Who/Am", func(ctx context.Context, _, reply []byte) ([]byte, error) {
		ran.Add(1)
		c := handler.CallFrom(ctx)
		if c.Identity == nil {
			return append(reply, "nobody"...), nil
		}
		return append(reply, c.Identity.Subject...), nil
	})
	return reg
}

func request(id uint32) []byte {
	return proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: id}, "Who/Am", nil, nil)
}

// Fault 20 and the handshake: an authenticating server serves nothing
// before a good Hello, holds frames before it to a small limit, and closes
// a connection that does not authenticate in time.
func TestAuthentication(t *testing.T) {
	var ran atomic.Int64
	s := start(t, whoRegistry(&ran), reactor.Options{
		Authenticator:    auth.Tokens{"s3cret": {Subject: "alice"}},
		HandshakeTimeout: 300 * time.Millisecond,
	})
	baseline(t)

	t.Run("good hello, calls pipelined behind it", func(t *testing.T) {
		r := dialRaw(t, s)
		r.send(append(append(proto.AppendPing(nil, []byte("p")), proto.AppendHello(nil, "token", []byte("s3cret"))...), request(1)...))
		if f, err := r.next(); err != nil || f.Kind != proto.KindPong {
			t.Fatalf("a Ping before the handshake: %v, %v", f.Kind, err)
		}
		if f, err := r.next(); err != nil || f.Kind != proto.KindWelcome || string(f.Payload) != "alice" {
			t.Fatalf("Welcome: %v %q, %v", f.Kind, f.Payload, err)
		}
		if f, err := r.next(); err != nil || f.Kind != proto.KindResponse || string(f.Payload) != "alice" {
			t.Fatalf("the call after the Hello: %v %q, %v", f.Kind, f.Payload, err)
		}
	})
	before := ran.Load()
	for _, tc := range []struct {
		name  string
		bytes []byte
		code  proto.Code
	}{
		{"call before hello", request(1), proto.CodeUnauthenticated},
		{"wrong secret", append(proto.AppendHello(nil, "token", []byte("guess")), request(1)...), proto.CodeUnauthenticated},
		{"unknown method", proto.AppendHello(nil, "kerberos", []byte("s3cret")), proto.CodeUnauthenticated},
		// The header alone: it is refused for its length before the rest.
		{"oversized frame before hello", proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, "Who/Am", nil, make([]byte, 5000))[:proto.HeaderSize], proto.CodeInternal},
		{"no hello in time", nil, proto.CodeUnauthenticated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if overWS && tc.name == "oversized frame before hello" {
				t.Skip("a WebSocket message carries a whole frame: a header cannot come alone")
			}
			r := dialRaw(t, s)
			if tc.bytes != nil {
				r.send(tc.bytes)
			}
			if code, msg := expectGoAway(t, r, 5*time.Second); code != tc.code {
				t.Fatalf("GoAway %v %q, want %v", code, msg, tc.code)
			}
		})
	}
	if n := ran.Load(); n != before {
		t.Fatalf("a handler ran %d times for connections that never authenticated", n-before)
	}
}

// Without an Authenticator, a Hello is welcome but not needed.
func TestHelloWithoutAuthenticator(t *testing.T) {
	var ran atomic.Int64
	s := start(t, whoRegistry(&ran), reactor.Options{})
	r := dialRaw(t, s)
	r.send(append(proto.AppendHello(nil, "token", []byte("anything")), request(1)...))
	if f, err := r.next(); err != nil || f.Kind != proto.KindWelcome || len(f.Payload) != 0 {
		t.Fatalf("Welcome: %v %q, %v", f.Kind, f.Payload, err)
	}
	if f, err := r.next(); err != nil || string(f.Payload) != "nobody" {
		t.Fatalf("call: %v %q, %v", f.Kind, f.Payload, err)
	}
	r2 := dialRaw(t, s)
	r2.send(request(7))
	if f, err := r2.next(); err != nil || f.ID != 7 || string(f.Payload) != "nobody" {
		t.Fatalf("call without a Hello: %v %q, %v", f.Kind, f.Payload, err)
	}
}

// Per-route authorization by identity, over a real connection.
func TestAuthorization(t *testing.T) {
	reg := handler.NewRegistry()
	reg.Use(auth.Require(auth.Roles(map[string][]string{"Admin/Drop": {"admin"}})))
	reg.HandleFunc("Admin/Drop", func(_ context.Context, _, reply []byte) ([]byte, error) { return append(reply, "dropped"...), nil })
	s := start(t, reg, reactor.Options{Authenticator: auth.Tokens{"a": {Subject: "alice", Roles: []string{"admin"}}, "b": {Subject: "bob"}}})
	for _, tc := range []struct {
		token string
		kind  proto.Kind
		code  proto.Code
	}{{"a", proto.KindResponse, 0}, {"b", proto.KindError, proto.CodePermissionDenied}} {
		r := dialRaw(t, s)
		r.send(append(proto.AppendHello(nil, "", []byte(tc.token)), proto.AppendFrame(nil, proto.Header{Kind: proto.KindRequest, ID: 1}, "Admin/Drop", nil, nil)...))
		if f, _ := r.next(); f.Kind != proto.KindWelcome {
			t.Fatalf("token %s: %v, want Welcome", tc.token, f.Kind)
		}
		f, err := r.next()
		if err != nil || f.Kind != tc.kind {
			t.Fatalf("token %s: %v, %v", tc.token, f.Kind, err)
		}
		if code, _ := f.ErrorBody(); tc.kind == proto.KindError && code != tc.code {
			t.Fatalf("token %s: code %v", tc.token, code)
		}
	}
}

// The client's Credentials: its Hello is answered before any call, so a
// good token serves every connection (including redialled ones) as its
// subject, and a bad one fails Dial with Unauthenticated without a
// handler ever running.
func TestClientCredentials(t *testing.T) {
	var ran atomic.Int64
	s := start(t, whoRegistry(&ran), reactor.Options{
		Authenticator: auth.Any{auth.Tokens{"s3cret": {Subject: "alice"}}, auth.HMAC{Key: []byte("k")}},
	})
	call := func(c *client.Client) (string, error) {
		reply, err := c.CallRaw(ctxT(t), "Who/Am", nil, nil)
		return string(reply), err
	}

	c := dial(t, s, client.Options{Conns: 3, Credentials: &client.Credentials{Method: "token", Secret: []byte("s3cret")}})
	for range 6 {
		if who, err := call(c); err != nil || who != "alice" {
			t.Fatalf("Who/Am with a good token: %q, %v", who, err)
		}
	}
	signed := []byte(auth.HMAC{Key: []byte("k")}.Sign(handler.Identity{Subject: "bob"}, time.Now().Add(time.Hour)))
	c2 := dial(t, s, client.Options{Credentials: &client.Credentials{Method: "hmac", Secret: signed}})
	if who, err := call(c2); err != nil || who != "bob" {
		t.Fatalf("Who/Am with an HMAC token: %q, %v", who, err)
	}

	before := ran.Load()
	addr := s.Addr().String()
	for _, cr := range []*client.Credentials{
		{Method: "token", Secret: []byte("guess")},
		{Method: "kerberos", Secret: []byte("s3cret")},
		{Method: "hmac", Secret: []byte(auth.HMAC{Key: []byte("other")}.Sign(handler.Identity{Subject: "mallory"}, time.Now().Add(time.Hour)))},
	} {
		opts := client.Options{Credentials: cr, MaxRetries: -1}
		if overTLS {
			opts.TLS = clientTLS(t, false)
		}
		c, err := client.Dial(ctxT(t), addr, opts)
		if err == nil {
			c.Close()
			t.Fatalf("Dial with %s %q succeeded", cr.Method, cr.Secret)
		}
		if code := handler.CodeOf(err); code != proto.CodeUnauthenticated {
			t.Fatalf("Dial with %s %q: %v (code %v), want Unauthenticated", cr.Method, cr.Secret, err, code)
		}
	}
	// Without credentials, the connection is made but its calls are refused.
	c3 := dial(t, s, client.Options{MaxRetries: -1})
	if _, err := call(c3); handler.CodeOf(err) != proto.CodeUnauthenticated {
		t.Fatalf("a call without credentials: %v, want Unauthenticated", err)
	}
	if n := ran.Load(); n != before {
		t.Fatalf("a handler ran %d times for clients that never authenticated", n-before)
	}
}
