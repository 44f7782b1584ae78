package load

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// CompareReport is how a replay's answers compared with the recorded ones
// (ReplayConfig.Compare). Two answers match when their codes are the same
// (an Error's message is not compared) and, when both succeeded, their
// payloads are: as JSON values when both are valid JSON (numbers by value,
// objects whatever their keys' order, the fields of Ignore left out),
// byte for byte otherwise.
type CompareReport struct {
	Compared   int64                       `json:"compared"`   // answers checked against a recorded one
	Mismatches int64                       `json:"mismatches"` // of those, the ones that differ
	Ignore     []string                    `json:"ignore,omitempty"`
	ByRoute    map[string]*RouteMismatches `json:"by_route,omitempty"`
}

// RouteMismatches are a route's mismatches: their number, and the first
// few of them.
type RouteMismatches struct {
	Count    int64      `json:"count"`
	Examples []Mismatch `json:"examples"`
}

// Mismatch is an answer that differs from the recorded one.
type Mismatch struct {
	At   string `json:"at"`   // the call's time in the recording
	What string `json:"what"` // "code", "payload", or the JSON path that differs ("$.user.name")
	Want string `json:"want"` // the recorded answer's, shortened
	Got  string `json:"got"`  // the replay's, shortened
}

// Limits of a comparison's report.
const (
	mismatchExamples = 3  // per route
	shownBytes       = 80 // of a value in an example
)

// comparer checks a replay's answers; its methods are safe for concurrent
// use (answers come on the clients' goroutines).
type comparer struct {
	names map[string]bool // fields ignored at any depth
	paths map[string]bool // fields ignored at their dotted path from the top

	mu  sync.Mutex
	rep CompareReport
}

// newComparer returns a comparer ignoring the JSON fields of ignore.
func newComparer(ignore []string) *comparer {
	c := &comparer{names: map[string]bool{}, paths: map[string]bool{}, rep: CompareReport{ByRoute: map[string]*RouteMismatches{}}}
	for _, f := range ignore {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		c.rep.Ignore = append(c.rep.Ignore, f)
		if strings.Contains(f, ".") {
			c.paths[f] = true
		} else {
			c.names[f] = true
		}
	}
	return c
}

// check compares the answer to call, reply or err, with the recorded one.
func (c *comparer) check(call *ReplayCall, reply []byte, err error) {
	m, differ := c.diff(call, reply, err)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rep.Compared++
	if !differ {
		return
	}
	c.rep.Mismatches++
	rm := c.rep.ByRoute[call.Route]
	if rm == nil {
		rm = &RouteMismatches{}
		c.rep.ByRoute[call.Route] = rm
	}
	rm.Count++
	if len(rm.Examples) < mismatchExamples {
		m.At = call.At.String()
		rm.Examples = append(rm.Examples, m)
	}
}

// diff returns how the answer differs from the recorded one, and whether
// it does.
func (c *comparer) diff(call *ReplayCall, reply []byte, err error) (Mismatch, bool) {
	code := proto.CodeOK
	if err != nil {
		code = handler.CodeOf(err)
	}
	if code != call.Code {
		want := call.Code.String()
		if call.Code != proto.CodeOK && len(call.Answer) > 0 {
			want += ": " + string(call.Answer)
		}
		got := code.String()
		if err != nil {
			got = code.String() + ": " + err.Error()
		}
		return Mismatch{What: "code", Want: shorten([]byte(want)), Got: shorten([]byte(got))}, true
	}
	if code != proto.CodeOK || call.AnswerCodeOnly {
		return Mismatch{}, false // the same failure (messages are not compared), or no payload to compare
	}
	if json.Valid(call.Answer) && json.Valid(reply) {
		want, werr := decodeJSON(call.Answer)
		got, gerr := decodeJSON(reply)
		if werr == nil && gerr == nil {
			path, w, g, differ := c.jsonDiff("$", nil, want, got)
			if !differ {
				return Mismatch{}, false
			}
			return Mismatch{What: path, Want: jsonText(w), Got: jsonText(g)}, true
		}
	}
	if bytes.Equal(call.Answer, reply) {
		return Mismatch{}, false
	}
	return Mismatch{What: "payload", Want: shorten(call.Answer), Got: shorten(reply)}, true
}

// decodeJSON decodes b keeping numbers as written (json.Number).
func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// jsonDiff compares the JSON values want and got at path (shown) and keys
// (the object keys from the top, arrays passed through, for the ignored
// paths), and returns the path of the first difference and the values
// there.
func (c *comparer) jsonDiff(path string, keys []string, want, got any) (string, any, any, bool) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path, want, got, true
		}
		for _, k := range unionKeys(w, g) {
			sub := append(keys[:len(keys):len(keys)], k)
			if c.names[k] || c.paths[strings.Join(sub, ".")] {
				continue
			}
			wv, win := w[k]
			gv, gin := g[k]
			p := path + "." + k
			if win != gin {
				return p, orAbsent(wv, win), orAbsent(gv, gin), true
			}
			if p, a, b, differ := c.jsonDiff(p, sub, wv, gv); differ {
				return p, a, b, true
			}
		}
		return "", nil, nil, false
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return path, want, got, true
		}
		for i := range w {
			if p, a, b, differ := c.jsonDiff(path+"["+strconv.Itoa(i)+"]", keys, w[i], g[i]); differ {
				return p, a, b, true
			}
		}
		return "", nil, nil, false
	case json.Number:
		g, ok := got.(json.Number)
		if !ok {
			return path, want, got, true
		}
		if w == g {
			return "", nil, nil, false
		}
		wf, werr := w.Float64()
		gf, gerr := g.Float64()
		if werr == nil && gerr == nil && wf == gf {
			return "", nil, nil, false
		}
		return path, want, got, true
	default: // string, bool, nil
		if want != got {
			return path, want, got, true
		}
		return "", nil, nil, false
	}
}

// absent stands for a field one side lacks.
type absent struct{}

func orAbsent(v any, in bool) any {
	if !in {
		return absent{}
	}
	return v
}

// unionKeys returns the keys of a and b, sorted.
func unionKeys(a, b map[string]any) []string {
	keys := sortedKeys(a)
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// jsonText is v as JSON, shortened; "(absent)" for a missing field.
func jsonText(v any) string {
	if _, ok := v.(absent); ok {
		return "(absent)"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return shorten(b)
}

// shorten returns b as text of at most shownBytes bytes (and "…"), quoted
// if it is not printable UTF-8.
func shorten(b []byte) string {
	cut := len(b) > shownBytes
	if cut {
		b = b[:shownBytes]
		for len(b) > 0 && !utf8.Valid(b) {
			b = b[:len(b)-1] // not in the middle of a character
		}
	}
	s := string(b)
	if !utf8.Valid(b) || strings.ContainsFunc(s, func(r rune) bool { return r < ' ' && r != '\t' }) {
		s = strconv.Quote(s)
	}
	if cut {
		s += "…"
	}
	return s
}

// report returns what the comparer found.
func (c *comparer) report() *CompareReport {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.rep
	return &r
}

// writeText writes the comparison as rpcd bench -compare prints it.
func (r *CompareReport) writeText(b *bytes.Buffer) {
	ignoring := ""
	if len(r.Ignore) > 0 {
		ignoring = " (ignoring " + strings.Join(r.Ignore, ", ") + ")"
	}
	if r.Mismatches == 0 {
		fmt.Fprintf(b, "compare: all %d answers match the recorded ones%s\n", r.Compared, ignoring)
		return
	}
	counts := map[string]int64{}
	for route, rm := range r.ByRoute {
		counts[route] = rm.Count
	}
	fmt.Fprintf(b, "compare: %d of %d answers differ from the recorded ones%s: %s\n", r.Mismatches, r.Compared, ignoring, countsText(counts, -1))
	routes := sortedKeys(counts)
	sortByCount(routes, counts)
	for _, route := range routes {
		for _, m := range r.ByRoute[route].Examples {
			fmt.Fprintf(b, "  %s at %s: %s: want %s, got %s\n", route, m.At, m.What, m.Want, m.Got)
		}
	}
}
