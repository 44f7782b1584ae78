package gen

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/handler/schema"
)

var update = flag.Bool("update", false, "rewrite the golden files from the built-in routes")

// builtinDescriptions are the descriptions of the routes rpcd serve has,
// registered as daemon.New registers them.
func builtinDescriptions(t *testing.T) []schema.Description {
	t.Helper()
	reg := handler.NewRegistry()
	builtin.Register(reg)
	builtin.HandleStats(reg, func() int { return 0 })
	builtin.HandleHealth(reg, func() bool { return true })
	return schema.Descriptions(reg)
}

// goldens are the generated files for the built-in routes, where the
// clients' tests use them: each is run against rpcd serve there.
var goldens = []struct {
	name string
	gen  func([]schema.Description, Options) ([]byte, error)
	opts Options
	file string // relative to this package
}{
	{"TypeScript", TypeScript, Options{}, "../clients/ts/test/gen/api.ts"},
	{"Python", Python, Options{}, "../clients/python/tests/builtin_api.py"},
	{"Go", Go, Options{Package: "builtinapi"}, "internal/builtinapi/api.go"},
}

// TestGolden pins what each generator writes for rpcd serve's routes:
// go test ./gen -update rewrites the files after a change meant to change
// them, and the diff shows what changed.
func TestGolden(t *testing.T) {
	ds := builtinDescriptions(t)
	for _, g := range goldens {
		t.Run(g.name, func(t *testing.T) {
			got, err := g.gen(ds, g.opts)
			if err != nil {
				t.Fatal(err)
			}
			if *update {
				if err := os.WriteFile(g.file, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(g.file)
			if err != nil {
				t.Fatalf("%v: run go test ./gen -update to write it", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s is not what %s writes for the built-in routes (go test ./gen -update rewrites it):\n%s", g.file, g.name, firstDiff(string(want), string(got)))
			}
		})
	}
}

// firstDiff shows the first line where a and b differ.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return "line " + strconv.Itoa(i+1) + ":\n  file: " + x + "\n  gen:  " + y
		}
	}
	return "(same lines)"
}

// TestSameBytes: the same descriptions give the same bytes, whether they
// come from the registry or from the JSON a server sends (in any order),
// every time.
func TestSameBytes(t *testing.T) {
	ds := builtinDescriptions(t)
	wire, err := json.Marshal(ds)
	if err != nil {
		t.Fatal(err)
	}
	read, err := Read(bytes.NewReader(wire))
	if err != nil {
		t.Fatal(err)
	}
	reversed := append([]schema.Description(nil), read...)
	for i, j := 0, len(reversed)-1; i < j; i, j = i+1, j-1 {
		reversed[i], reversed[j] = reversed[j], reversed[i]
	}
	for _, g := range goldens {
		first, err := g.gen(ds, g.opts)
		if err != nil {
			t.Fatal(err)
		}
		for i, in := range [][]schema.Description{ds, read, reversed} {
			again, err := g.gen(in, g.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(first, again) {
				t.Errorf("%s: run %d wrote other bytes:\n%s", g.name, i, firstDiff(string(first), string(again)))
			}
		}
	}
}

// TestTypeChangeShows: a field added to a route's argument, and a reply
// that changes type, show in every language, and nothing else changes.
func TestTypeChangeShows(t *testing.T) {
	ds := builtinDescriptions(t)
	changed := make([]schema.Description, len(ds))
	copy(changed, ds)
	for i, d := range changed {
		if d.Name != builtin.Sum {
			continue
		}
		arg := *d.Argument
		arg.Properties = append(append(schema.Properties{}, arg.Properties...), schema.Property{Name: "c", Schema: &schema.Schema{Type: schema.Types{"string"}}})
		changed[i].Argument = &arg
		changed[i].Reply = &schema.Schema{Type: schema.Types{"number"}, Format: "double"}
	}
	want := map[string][]string{
		"TypeScript": {"+  c?: string;"}, // a double is a number, as an int64 is
		"Python":     {`+    c: str = ""`, "-        return int(out)", "+        return float(out)"},
		"Go":         {"+\tC string `json:\"c\"`", "+\tMathSum = handler.Method[SumArgs, float64](\"Math/Sum\")"},
	}
	for _, g := range goldens {
		before, err := g.gen(ds, g.opts)
		if err != nil {
			t.Fatal(err)
		}
		after, err := g.gen(changed, g.opts)
		if err != nil {
			t.Fatal(err)
		}
		d := lineDiff(string(before), string(after))
		for _, line := range want[g.name] {
			if !strings.Contains(d, line+"\n") {
				t.Errorf("%s: the diff lacks %q:\n%s", g.name, line, d)
			}
		}
		if n := strings.Count(d, "\n"); n > 10 {
			t.Errorf("%s: the diff has %d lines, more than the change needs:\n%s", g.name, n, d)
		}
	}
}

// lineDiff lists the lines only a has ("-") and only b has ("+"), in
// order: enough for generated files that differ in a few lines.
func lineDiff(a, b string) string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	ca, cb := count(a), count(b)
	var out strings.Builder
	for _, l := range strings.Split(a, "\n") {
		if ca[l] > cb[l] {
			out.WriteString("-" + l + "\n")
			ca[l]--
		}
	}
	ca = count(a)
	for _, l := range strings.Split(b, "\n") {
		if cb[l] > ca[l] {
			out.WriteString("+" + l + "\n")
			cb[l]--
		}
	}
	return out.String()
}
