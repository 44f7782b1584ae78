package proto

import (
	"strings"
	"testing"
)

func TestTopicsAndPatterns(t *testing.T) {
	for _, tc := range []struct {
		s              string
		topic, pattern bool
	}{
		{"orders", true, true},
		{"orders.eu.created", true, true},
		{"a.b-c_d.9", true, true},
		{"*", false, true},
		{">", false, true},
		{"orders.*.created", false, true},
		{"orders.>", false, true},
		{"*.>", false, true},
		{"", false, false},
		{".", false, false},
		{"a.", false, false},
		{".a", false, false},
		{"a..b", false, false},
		{"a.>.b", false, false},
		{"a*.b", false, false},
		{"a.b>", false, false},
		{"a b", false, false},
		{"a.\x7f", false, false},
	} {
		if got := ValidTopic([]byte(tc.s)) == nil; got != tc.topic {
			t.Errorf("ValidTopic(%q) = %v, want %v", tc.s, got, tc.topic)
		}
		if got := ValidPattern([]byte(tc.s)) == nil; got != tc.pattern {
			t.Errorf("ValidPattern(%q) = %v, want %v", tc.s, got, tc.pattern)
		}
	}
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, topic string
		want           bool
	}{
		{"a", "a", true},
		{"a", "b", false},
		{"a", "a.b", false},
		{"a.b", "a", false},
		{"a.*", "a.b", true},
		{"a.*", "a", false},
		{"a.*", "a.b.c", false},
		{"*.b", "a.b", true},
		{"*", "a", true},
		{"*", "a.b", false},
		{"a.>", "a.b", true},
		{"a.>", "a.b.c", true},
		{"a.>", "a", false},
		{">", "a", true},
		{">", "a.b.c", true},
		{"a.*.>", "a.b", false},
		{"a.*.>", "a.b.c", true},
		{"orders.*.created", "orders.eu.created", true},
		{"orders.*.created", "orders.eu.deleted", false},
	} {
		if got := Match([]byte(tc.pattern), []byte(tc.topic)); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.topic, got, tc.want)
		}
		if got := matchReference(tc.pattern, tc.topic); got != tc.want {
			t.Errorf("the reference matcher is wrong for (%q, %q)", tc.pattern, tc.topic)
		}
	}
}

// matchReference is Match written the plain way, token lists and all.
func matchReference(pattern, topic string) bool {
	p, tt := strings.Split(pattern, "."), strings.Split(topic, ".")
	for i, tok := range p {
		switch {
		case tok == ">":
			return i == len(p)-1 && len(tt) > i
		case i >= len(tt):
			return false
		case tok != "*" && tok != tt[i]:
			return false
		}
	}
	return len(p) == len(tt)
}

// FuzzMatch: the grammar never panics, and for every valid pattern and
// topic Match agrees with the plain reference; every frame that carries
// them decodes and re-encodes unchanged.
func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{{"a.*.c", "a.b.c"}, {"a.>", "a.b.c"}, {">", "x"}, {"a..b", "a.b"}, {"*", "**"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, topic string) {
		perr, terr := ValidPattern([]byte(pattern)), ValidTopic([]byte(topic))
		if perr != nil || terr != nil {
			return
		}
		if got, want := Match([]byte(pattern), []byte(topic)), matchReference(pattern, topic); got != want {
			t.Fatalf("Match(%q, %q) = %v, reference %v", pattern, topic, got, want)
		}
		if ValidTopic([]byte(topic)) == nil && !Match([]byte(topic), []byte(topic)) {
			t.Fatalf("topic %q does not match itself", topic)
		}
		if len(pattern) > DefaultMaxRoute || len(topic) > DefaultMaxRoute {
			return
		}
		for _, frame := range [][]byte{
			AppendSubscribe(nil, 7, pattern),
			AppendPublish(nil, topic, CodecJSON, []byte(`"x"`)),
			AppendMessage(nil, 7, []byte(topic), CodecRaw, []byte("x")),
		} {
			fr, n, err := Decode(frame, nil)
			if err != nil || n != len(frame) || string(reencode(&fr)) != string(frame) {
				t.Fatalf("frame % x: %v (%d of %d bytes)", frame, err, n, len(frame))
			}
		}
	})
}

func TestPubSubFrames(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame []byte
		err   string
	}{
		{"subscribe", AppendSubscribe(nil, 1, "orders.*"), ""},
		{"unsubscribe", AppendUnsubscribe(nil, 1, CodeOK, ""), ""},
		{"unsubscribe with a reason", AppendUnsubscribe(nil, 1, CodeResourceExhausted, "slow"), ""},
		{"publish", AppendPublish(nil, "orders.eu", CodecJSON, []byte("1")), ""},
		{"message", AppendMessage(nil, 3, []byte("orders.eu"), CodecJSON, []byte("1")), ""},
		{"a publish refused (Error id 0)", AppendError(nil, 0, FlagUnprocessed, CodePermissionDenied, "may not publish to a"), ""},
		{"a refusal without its code", AppendFrame(nil, Header{Kind: KindError}, "", nil, []byte{7}), "error body of 1 bytes"},
		{"cancel of id 0", AppendCancel(nil, 0), "call id 0"},
		{"subscribe without id", AppendSubscribe(nil, 0, "a"), "call id 0"},
		{"subscribe to a bad pattern", AppendSubscribe(nil, 1, "a.>.b"), "'>' before the last token"},
		{"publish with an id", AppendFrame(nil, Header{Kind: KindPublish, ID: 4}, "a", nil, nil), "call id 4, want 0"},
		{"publish to a pattern", AppendPublish(nil, "a.*", CodecRaw, nil), "wildcard"},
		{"message to a bad topic", AppendMessage(nil, 1, []byte("a..b"), CodecRaw, nil), "empty token"},
		{"publish with a deadline", AppendFrame(nil, Header{Kind: KindPublish, Deadline: 5}, "a", nil, nil), "deadline on a Publish"},
		{"unsubscribe of 1 byte", AppendFrame(nil, Header{Kind: KindUnsubscribe, ID: 1}, "", nil, []byte{0}), "1 byte"},
		{"subscribe with a payload", AppendFrame(nil, Header{Kind: KindSubscribe, ID: 1}, "a", nil, []byte{0}), "payload"},
		{"unsubscribe with a route", AppendFrame(nil, Header{Kind: KindUnsubscribe, ID: 1}, "a", nil, nil), "route on a Unsubscribe"},
	} {
		_, _, err := Decode(tc.frame, nil)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.err)
		}
	}
	f, _, _ := Decode(AppendUnsubscribe(nil, 9, CodeResourceExhausted, "slow"), nil)
	if code, msg := f.UnsubscribeBody(); code != CodeResourceExhausted || string(msg) != "slow" || f.ID != 9 {
		t.Fatalf("unsubscribe body %v %q id %d", code, msg, f.ID)
	}
}
