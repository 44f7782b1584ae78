package auth

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// Topic permissions: who may publish to which topics and subscribe to which
// patterns (docs/two-way.md, "Who may publish and subscribe"). A server
// given a TopicPolicy (reactor.Options.Topics) asks it, once per
// connection, for the connection's TopicAccess, and consults that on every
// Publish and Subscribe the connection sends, whatever carries it (the
// event loops or the TLS transport). What the server's own program
// publishes (reactor.Server.Publish, Broadcast) is not checked.

// TopicPolicy decides where connections may publish and subscribe;
// TopicAccess is one connection's permissions. They are handler's, named
// here beside Topics, which implements them.
type (
	TopicPolicy = handler.TopicPolicy
	TopicAccess = handler.TopicAccess
)

// TopicRules are the topics the identities with one role may publish to
// and subscribe to.
type TopicRules struct {
	Publish   TopicList
	Subscribe TopicList
}

// TopicList allows the topics that one of its Allow patterns matches and
// none of its Deny patterns does. Patterns are those of Subscribe
// ("orders.*.created", "orders.>"); a topic is a pattern too.
type TopicList struct {
	Allow, Deny []string
}

// EveryRole is the key of Topics' map whose rules apply to every
// connection, whatever its roles, and to connections with no identity.
const EveryRole = "*"

// TopicPermissions is a TopicPolicy built by Topics from rules by role.
type TopicPermissions struct {
	byRole map[string]*topicAccess // compiled rules of each role, EveryRole's among them
	firsts map[string]string       // the first tokens the rules' patterns name, each its own label
}

// Topics returns the TopicPolicy of rules by role. A connection gets the
// rules of each of its identity's roles and those of EveryRole ("*"),
// together:
//
//   - it may publish to a topic if an Allow pattern of those rules matches
//     it and no Deny pattern does: a Deny wins over any Allow, whichever
//     role each comes from;
//   - it may subscribe to a pattern if it may have every topic the pattern
//     matches: each is matched by an Allow pattern and by no Deny pattern.
//     A pattern that reaches a single denied topic is refused whole; ">" is
//     refused unless everything is allowed and nothing denied;
//   - a connection whose roles have no rules, and one without an identity,
//     has only EveryRole's rules: with none, it may do neither.
//
// Patterns that are not valid ones (proto.ValidPattern) are an error.
func Topics(byRole map[string]TopicRules) (*TopicPermissions, error) {
	p := &TopicPermissions{byRole: map[string]*topicAccess{}, firsts: map[string]string{}}
	for role, rules := range byRole {
		a := &topicAccess{}
		for _, l := range []struct {
			what     string
			patterns []string
			into     *[][]byte
		}{
			{"publish allow", rules.Publish.Allow, &a.pubAllow},
			{"publish deny", rules.Publish.Deny, &a.pubDeny},
			{"subscribe allow", rules.Subscribe.Allow, &a.subAllow},
			{"subscribe deny", rules.Subscribe.Deny, &a.subDeny},
		} {
			for _, pat := range l.patterns {
				if err := proto.ValidPattern([]byte(pat)); err != nil {
					why := strings.TrimPrefix(err.Error(), proto.ErrProtocol.Error()+": ")
					return nil, fmt.Errorf("rpcd: auth: role %s, %s pattern %q: %s", role, l.what, pat, why)
				}
				*l.into = append(*l.into, []byte(pat))
				first, _, _ := strings.Cut(pat, ".")
				p.firsts[first] = first
			}
		}
		p.byRole[role] = a
	}
	return p, nil
}

// Access implements TopicPolicy: the rules of id's roles and EveryRole's.
func (p *TopicPermissions) Access(id *handler.Identity) TopicAccess {
	var roles []string
	if id != nil {
		roles = id.Roles
	}
	var found []*topicAccess
	for _, role := range append([]string{EveryRole}, roles...) {
		if a := p.byRole[role]; a != nil && !containsAccess(found, a) {
			found = append(found, a)
		}
	}
	switch len(found) {
	case 0:
		return &topicAccess{}
	case 1:
		return found[0] // shared: it is never written after Topics
	}
	merged := &topicAccess{}
	for _, a := range found {
		merged.pubAllow = append(merged.pubAllow, a.pubAllow...)
		merged.pubDeny = append(merged.pubDeny, a.pubDeny...)
		merged.subAllow = append(merged.subAllow, a.subAllow...)
		merged.subDeny = append(merged.subDeny, a.subDeny...)
	}
	return merged
}

func containsAccess(as []*topicAccess, a *topicAccess) bool {
	for _, x := range as {
		if x == a {
			return true
		}
	}
	return false
}

// Label implements TopicPolicy: the topic's or pattern's first token when
// a rule's pattern begins with it too (a wildcard first token, "*" or ">",
// is its own label), else "other".
func (p *TopicPermissions) Label(topicOrPattern []byte) string {
	first, _, _ := bytes.Cut(topicOrPattern, []byte("."))
	if len(first) == 1 && (first[0] == '*' || first[0] == '>') {
		return string(first)
	}
	if label, ok := p.firsts[string(first)]; ok { // the lookup does not allocate
		return label
	}
	return "other"
}

// topicAccess is a connection's rules, compiled.
type topicAccess struct {
	pubAllow, pubDeny, subAllow, subDeny [][]byte
}

// MayPublish implements TopicAccess. It allocates nothing.
func (a *topicAccess) MayPublish(topic []byte) bool {
	return matchesAny(a.pubAllow, topic) && !matchesAny(a.pubDeny, topic)
}

// MaySubscribe implements TopicAccess.
func (a *topicAccess) MaySubscribe(pattern []byte) bool {
	for _, d := range a.subDeny {
		if overlap(d, pattern) {
			return false
		}
	}
	return covers(a.subAllow, pattern)
}

func matchesAny(patterns [][]byte, topic []byte) bool {
	for _, p := range patterns {
		if proto.Match(p, topic) {
			return true
		}
	}
	return false
}
