package handler

import "context"

// What a transport asks of the program about who is calling: the
// interfaces a server is given (reactor.Options.Authenticator and Topics,
// gateway.Options.Authenticator). Package auth implements them: Tokens and
// HMAC authenticate, Topics grants topics by role.

// Authenticator checks a connection's credentials. method is what the
// client named in its Hello (empty if it named none). It returns the
// identity the connection acts as, or an error to refuse it; the error's
// text goes to the client, so it should not say why in detail.
type Authenticator interface {
	Authenticate(ctx context.Context, method string, credentials []byte) (*Identity, error)
}

// TopicPolicy decides where connections may publish and subscribe.
type TopicPolicy interface {
	// Access returns the permissions of a connection that authenticated
	// as id, nil for a connection without an identity. The server asks
	// once per connection, at its first Publish or Subscribe, and keeps
	// the answer; it runs on the connection's event loop and must not
	// block. It must not return nil.
	Access(id *Identity) TopicAccess

	// Label names a refused topic or pattern in the server's metrics. Its
	// answers must come from a small, fixed set, and say no more than the
	// policy does: a client chooses the topics it is refused, so a label
	// made from any part of them would let it make as many series as it
	// likes.
	Label(topicOrPattern []byte) string
}

// TopicAccess is one connection's topic permissions. Its methods run on
// the connection's event loop, for every Publish and Subscribe: they must
// not block, and should not allocate.
type TopicAccess interface {
	// MayPublish reports whether the connection may publish to topic, a
	// valid topic.
	MayPublish(topic []byte) bool
	// MaySubscribe reports whether the connection may subscribe to
	// pattern, a valid pattern: whether it may have every topic the
	// pattern matches.
	MaySubscribe(pattern []byte) bool
}
