package record

import (
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/rpcd/rpcd/proto"
)

// DefaultMaxBytes is the size a recording stops at when Options.MaxBytes
// is 0: 1 GiB.
const DefaultMaxBytes = 1 << 30

// Options are a recording's limits and rules. The zero Options records
// every call of every connection, without answers, up to DefaultMaxBytes.
type Options struct {
	Duration time.Duration // stop after; 0: until stopped (or MaxBytes)
	MaxBytes int64         // stop once the file would pass it; 0: DefaultMaxBytes
	Sample   float64       // fraction of connections recorded, in (0, 1]; 0 means 1
	Routes   []string      // record only what these path.Match patterns match (a call's route, a stream's, a topic or a pattern); none: all
	Redact   []Redaction   // payload rules by route, the first that matches wins; none: payloads kept
	Answers  bool          // record the server's answers too (Response, Error, Message, stream frames), for -compare
	Source   string        // "server" or "proxy", written in the file's header
	Server   string        // the recorded server's address, written in the header
}

// Action is what redaction does to a payload.
type Action uint8

// Redaction's actions.
const (
	Keep    Action = 0 // the payload is recorded as it is
	Drop    Action = 1 // the payload is left out; its length is recorded
	Replace Action = 2 // the payload is recorded as Redaction.With; its length is the original's
)

var actionNames = [...]string{Keep: "keep", Drop: "drop", Replace: "replace"}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// parseAction returns the action named s.
func parseAction(s string) (Action, bool) {
	for a, n := range actionNames {
		if n == s {
			return Action(a), true
		}
	}
	return Keep, false
}

// Redaction is a rule for the payloads of the calls on the routes Route
// matches (path.Match): their requests' payloads and their answers'. An
// Error's or a StreamReset's code is kept whatever the rule; the rule
// applies to its message.
type Redaction struct {
	Route  string // a path.Match pattern
	Action Action
	With   []byte // Replace's payload
}

// ParseRedaction parses a rule written "ROUTE=keep", "ROUTE=drop" or
// "ROUTE=replace:TEXT" (rpcd record's and rpcd serve's -record-redact).
func ParseRedaction(s string) (Redaction, error) {
	route, rule, ok := strings.Cut(s, "=")
	if !ok || route == "" {
		return Redaction{}, errorf("redaction %q is not ROUTE=keep, ROUTE=drop or ROUTE=replace:TEXT", s)
	}
	if _, err := path.Match(route, ""); err != nil {
		return Redaction{}, errorf("redaction %q: route pattern: %v", s, err)
	}
	if text, ok := strings.CutPrefix(rule, "replace:"); ok {
		return Redaction{Route: route, Action: Replace, With: []byte(text)}, nil
	}
	switch rule {
	case "keep":
		return Redaction{Route: route, Action: Keep}, nil
	case "drop":
		return Redaction{Route: route, Action: Drop}, nil
	}
	return Redaction{}, errorf("redaction %q: want keep, drop or replace:TEXT after the =", s)
}

// validate checks o and returns it with its defaults set.
func (o Options) validate() (Options, error) {
	if o.Duration < 0 {
		return o, errorf("duration %v is negative", o.Duration)
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if min := int64(FileHeaderSize + MaxHeaderJSON + RecordPrefixSize + endBodySize); o.MaxBytes < min {
		return o, errorf("max bytes %d is less than %d", o.MaxBytes, min)
	}
	if o.Sample == 0 {
		o.Sample = 1
	}
	if math.IsNaN(o.Sample) || o.Sample <= 0 || o.Sample > 1 {
		return o, errorf("sample %v is not in (0, 1]", o.Sample)
	}
	for _, r := range o.Routes {
		if _, err := path.Match(r, ""); err != nil {
			return o, errorf("route pattern %q: %v", r, err)
		}
	}
	for _, r := range o.Redact {
		if _, err := path.Match(r.Route, ""); err != nil {
			return o, errorf("redaction route pattern %q: %v", r.Route, err)
		}
		if r.Action > Replace {
			return o, errorf("redaction of %q: %v", r.Route, r.Action)
		}
		if r.Action == Replace && len(r.With) > proto.DefaultMaxFrameSize/2 {
			return o, errorf("redaction of %q: its replacement takes %d bytes", r.Route, len(r.With))
		}
	}
	return o, nil
}

// Sampled reports whether a recording with sample fraction sample records
// connection conn: the connection's number, mixed by SplitMix64's
// finalizer, is below sample × 2^64 (docs/recording.md, "Sampling"). A
// fraction of 0 or 1 or more records every connection.
func Sampled(conn uint64, sample float64) bool {
	if sample <= 0 || sample >= 1 {
		return true
	}
	return mix(conn) < uint64(sample*0x1p64)
}

// mix is SplitMix64's finalizer.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// matchAny reports whether route matches one of patterns, or patterns is
// empty.
func matchAny(patterns []string, route []byte) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if match(p, route) {
			return true
		}
	}
	return false
}

// match is path.Match on a route held as bytes; a pattern without
// wildcards is compared without converting.
func match(pattern string, route []byte) bool {
	if !strings.ContainsAny(pattern, `*?[\`) {
		return pattern == string(route)
	}
	ok, _ := path.Match(pattern, string(route))
	return ok
}

// redaction returns the rule for route: the first of rules that matches,
// or Keep.
func redaction(rules []Redaction, route string) *Redaction {
	for i := range rules {
		if ok, _ := path.Match(rules[i].Route, route); ok {
			return &rules[i]
		}
	}
	return nil
}
