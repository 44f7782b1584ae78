package auth

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// containmentCase is a subscription pattern with the Allow and Deny
// patterns it is judged by, each a few tokens from a small alphabet.
type containmentCase struct {
	sub         string
	allow, deny []string
}

// caseTokens are what a fuzz input's bytes pick tokens from: four literals
// and the two wildcards (">" only last; elsewhere it stands for "*").
var caseTokens = []string{"orders", "secret", "eu", "x", "*", ">"}

// decodeCase reads a containmentCase from fuzz bytes: a byte for how many
// Allow (0-3) and Deny (0-2) patterns follow the subscription's, then per
// pattern a byte for its length (1-4 tokens) and a byte per token. Missing
// bytes read as 0, so every input is a case.
func decodeCase(data []byte) containmentCase {
	next := func() int {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return int(b)
	}
	pattern := func() string {
		n := 1 + next()%4
		toks := make([]string, n)
		for i := range toks {
			tok := caseTokens[next()%len(caseTokens)]
			if tok == ">" && i < n-1 {
				tok = "*"
			}
			toks[i] = tok
		}
		return strings.Join(toks, ".")
	}
	h := next()
	c := containmentCase{sub: pattern()}
	for range h % 4 {
		c.allow = append(c.allow, pattern())
	}
	for range (h / 4) % 3 {
		c.deny = append(c.deny, pattern())
	}
	return c
}

// encodeCase is decodeCase's inverse, for seeds written as patterns.
func encodeCase(sub string, allow, deny []string) []byte {
	out := []byte{byte(len(allow) + 4*len(deny))}
	for _, p := range append(append([]string{sub}, allow...), deny...) {
		toks := strings.Split(p, ".")
		out = append(out, byte(len(toks)-1))
		for _, tok := range toks {
			i := 0
			for caseTokens[i] != tok {
				i++ // panics for a token not in caseTokens: a seed to fix
			}
			out = append(out, byte(i))
		}
	}
	return out
}

// referenceTopics returns every topic of 1 to longest+1 tokens over the
// literals of patterns and one token none of them names. That finite set
// stands for all topics: a token no pattern names is matched only by
// wildcards, in every pattern alike, so one such token stands for all of
// them; and a topic of more than longest+1 tokens is matched by a pattern
// exactly when its first longest+1 tokens are (the patterns that are
// shorter match no such topic, and those ending in ">" decide by their
// first tokens, all within longest), so those stand for it.
func referenceTopics(patterns []string) []string {
	seen := map[string]bool{}
	alphabet := []string{"fresh"} // a token no pattern names: not among caseTokens
	longest := 0
	for _, p := range patterns {
		toks := strings.Split(p, ".")
		longest = max(longest, len(toks))
		for _, tok := range toks {
			if tok != "*" && tok != ">" && !seen[tok] {
				seen[tok] = true
				alphabet = append(alphabet, tok)
			}
		}
	}
	var out []string
	level := []string{""}
	for range longest + 1 {
		var nextLevel []string
		for _, prefix := range level {
			for _, tok := range alphabet {
				topic := tok
				if prefix != "" {
					topic = prefix + "." + tok
				}
				nextLevel = append(nextLevel, topic)
			}
		}
		out = append(out, nextLevel...)
		level = nextLevel
	}
	return out
}

func matchesAnyString(patterns []string, topic string) bool {
	for _, p := range patterns {
		if proto.Match([]byte(p), []byte(topic)) {
			return true
		}
	}
	return false
}

// checkContainment compares overlap, covers and a connection's
// MaySubscribe and MayPublish with their definitions over every reference
// topic.
func checkContainment(t *testing.T, c containmentCase) {
	t.Helper()
	all := append(append([]string{c.sub}, c.allow...), c.deny...)
	topics := referenceTopics(all)
	var allow, deny [][]byte
	for _, p := range c.allow {
		allow = append(allow, []byte(p))
	}
	for _, p := range c.deny {
		deny = append(deny, []byte(p))
	}

	perms, err := Topics(map[string]TopicRules{"r": {
		Publish:   TopicList{Allow: c.allow, Deny: c.deny},
		Subscribe: TopicList{Allow: c.allow, Deny: c.deny},
	}})
	if err != nil {
		t.Fatal(err)
	}
	access := perms.Access(&handler.Identity{Roles: []string{"r"}})

	// The definitions, topic by topic.
	wantCovers, wantAllowed := true, true
	wantOverlap := make([]bool, len(c.deny))
	for _, topic := range topics {
		published := matchesAnyString(c.allow, topic) && !matchesAnyString(c.deny, topic)
		if got := access.MayPublish([]byte(topic)); got != published {
			t.Fatalf("allow %q deny %q: MayPublish(%q) = %v, want %v", c.allow, c.deny, topic, got, published)
		}
		if !proto.Match([]byte(c.sub), []byte(topic)) {
			continue
		}
		if !matchesAnyString(c.allow, topic) {
			wantCovers = false
		}
		for i, d := range c.deny {
			if proto.Match([]byte(d), []byte(topic)) {
				wantOverlap[i] = true
			}
		}
		wantAllowed = wantAllowed && published
	}
	if got := covers(allow, []byte(c.sub)); got != wantCovers {
		t.Fatalf("covers(%q, %q) = %v, want %v", c.allow, c.sub, got, wantCovers)
	}
	for i, d := range c.deny {
		if got := overlap(deny[i], []byte(c.sub)); got != wantOverlap[i] {
			t.Fatalf("overlap(%q, %q) = %v, want %v", d, c.sub, got, wantOverlap[i])
		}
		if got := overlap([]byte(c.sub), deny[i]); got != wantOverlap[i] {
			t.Fatalf("overlap(%q, %q) = %v, want %v", c.sub, d, got, wantOverlap[i])
		}
	}
	if got := access.MaySubscribe([]byte(c.sub)); got != wantAllowed {
		t.Fatalf("allow %q deny %q: MaySubscribe(%q) = %v, want %v", c.allow, c.deny, c.sub, got, wantAllowed)
	}
}

// containmentSeeds are the cases worth keeping, each with what it shows.
var containmentSeeds = []struct {
	sub         string
	allow, deny []string
	want        bool // MaySubscribe
}{
	{"orders.>", []string{"orders.>"}, []string{"orders.secret.*"}, false},   // a deny inside the pattern
	{"orders.*.x", []string{"orders.>"}, []string{"orders.secret.*"}, false}, // orders.secret.x is denied
	{"orders.*", []string{"orders.>"}, []string{"orders.secret.*"}, true},    // two tokens: the deny needs three
	{"orders.eu.>", []string{"orders.>"}, []string{"orders.secret.*"}, true}, // another second token
	{"orders.secret.>", []string{"orders.>"}, []string{"orders.secret.*"}, false},
	{">", []string{"orders.>"}, nil, false},                      // ">" wants everything
	{">", []string{">"}, nil, true},                              // and everything is allowed
	{">", []string{">"}, []string{"x"}, false},                   // but one topic is denied
	{">", []string{"*", "*.>"}, nil, true},                       // every length, from two patterns
	{"orders.>", []string{"orders.*", "orders.*.>"}, nil, true},  // no one pattern covers it
	{"orders.>", []string{"orders.*", "orders.*.*"}, nil, false}, // four tokens are left out
	{"*", []string{"orders", "secret", "eu"}, nil, false},        // every literal named, but not every token
	{"orders.*", []string{"*.eu", "orders.x", "orders.*"}, nil, true},
	{"*.*", []string{"orders.*", "*.eu"}, nil, false},            // x.x is left out
	{"orders.eu", []string{"*.eu"}, []string{"orders.>"}, false}, // deny wins
	{"orders.eu", []string{"orders.*"}, []string{"orders.x.>"}, true},
	{"*.>", []string{"*.*.>", "*.*"}, nil, true},
	{"*.*.>", []string{"*.>"}, []string{"orders"}, true}, // a deny of one token reaches no topic of three
	{"orders", nil, nil, false},                          // nothing allowed
}

func TestTopicContainment(t *testing.T) {
	for _, s := range containmentSeeds {
		t.Run(fmt.Sprintf("%s/allow=%s/deny=%s", s.sub, strings.Join(s.allow, ","), strings.Join(s.deny, ",")), func(t *testing.T) {
			c := decodeCase(encodeCase(s.sub, s.allow, s.deny))
			if c.sub != s.sub || fmt.Sprint(c.allow) != fmt.Sprint(s.allow) || fmt.Sprint(c.deny) != fmt.Sprint(s.deny) {
				t.Fatalf("the seed decodes to %+v", c)
			}
			checkContainment(t, c)
			perms, err := Topics(map[string]TopicRules{"r": {Subscribe: TopicList{Allow: s.allow, Deny: s.deny}}})
			if err != nil {
				t.Fatal(err)
			}
			if got := perms.Access(&handler.Identity{Roles: []string{"r"}}).MaySubscribe([]byte(s.sub)); got != s.want {
				t.Fatalf("MaySubscribe = %v, want %v", got, s.want)
			}
		})
	}
}

// FuzzTopicContainment: for any subscription pattern and Allow and Deny
// patterns, covers, overlap, MaySubscribe and MayPublish agree with their
// definitions checked topic by topic over referenceTopics.
func FuzzTopicContainment(f *testing.F) {
	for _, s := range containmentSeeds {
		f.Add(encodeCase(s.sub, s.allow, s.deny))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkContainment(t, decodeCase(data))
	})
}
