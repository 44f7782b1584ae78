package gen

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/schema"
)

// node is a recursive type.
type node struct {
	Name   string `json:"name"`
	Kids   []node `json:"kids"`
	Parent *node  `json:"parent,omitempty"`
}

// odd has a field of each shape the generators write.
type odd struct {
	Bytes  []byte           `json:"bytes"`
	When   time.Time        `json:"when"`
	Ptr    *int32           `json:"ptr"`
	Arr    [3]uint8         `json:"arr"`
	Map    map[string]*node `json:"map"`
	Any    any              `json:"any"`
	Class  string           `json:"class"`
	Dash   int              `json:"x-y"`
	Quoted int64            `json:"q,string"`
	Inner  struct {
		A bool `json:"a"`
	} `json:"inner"`
	Floats []float32 `json:"floats,omitempty"`
}

// oddDescriptions are routes whose names and types test the generators'
// naming: recursion, an anonymous struct, names that are keywords or no
// identifiers, two routes and two types that want one name, a route
// without a slash and one named as a group.
func oddDescriptions(t *testing.T) []schema.Description {
	t.Helper()
	reg := handler.NewRegistry()
	reg.Handle("Odd/Do", handler.Func(func(context.Context, odd) (node, error) { return node{}, nil }))
	reg.Handle("Odd/do", handler.Func(func(context.Context, *node) ([]odd, error) { return nil, nil }))
	reg.Handle("a-b/c.d", handler.Func(func(context.Context, map[string]int) (*odd, error) { return nil, nil }))
	reg.HandleFunc("noslash", func(_ context.Context, _, r []byte) ([]byte, error) { return r, nil })
	reg.HandleStream("Odd", func(context.Context, handler.Stream) error { return nil })
	reg.Handle("Reply/Stream", handler.Func(func(context.Context, struct{}) (bool, error) { return true, nil }))
	ds := schema.Descriptions(reg)
	str := &schema.Schema{Type: schema.Types{"string"}}
	for i, title := range []string{"x.T", "y.T"} {
		ds = append(ds, schema.Description{Name: "Dup/" + string(rune('A'+i)), Kind: schema.KindTyped,
			Argument: &schema.Schema{Title: title, Type: schema.Types{"object"}, Properties: schema.Properties{{Name: "f" + title[:1], Schema: str}}},
			Reply:    &schema.Schema{AnyOf: []*schema.Schema{str, {Type: schema.Types{"integer"}}}}})
	}
	return ds
}

// TestOddSchemas: what the generators write for oddDescriptions compiles:
// go vet, tsc --strict and mypy --strict, each where it is installed
// (.ci/run runs this test once they are).
func TestOddSchemas(t *testing.T) {
	ds := oddDescriptions(t)
	code := map[string][]byte{}
	for name, g := range Languages {
		b, err := g(ds, Options{Package: "oddapi"})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		code[name] = b
	}
	for _, want := range []string{"  Do(args?: GenOdd,", "  Do2(args?: GenNode", "  OddRoute(opts?: StreamOptions): Stream;", "  Stream(args?:",
		"export interface XT {", "export interface YT {", "'x-y'?: number;", "kids: GenNode2[] | null;", "parent?: GenNode2 | null;"} {
		if !strings.Contains(string(code["ts"]), want) {
			t.Errorf("the TypeScript lacks %q:\n%s", want, code["ts"])
		}
	}

	t.Run("go", func(t *testing.T) {
		goCmd, err := exec.LookPath("go")
		if err != nil {
			t.Skip("no go command")
		}
		if _, err := os.Stat("testdata"); err != nil {
			if err := os.Mkdir("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove("testdata") }) // once empty
		}
		dir, err := os.MkdirTemp("testdata", "odd")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.WriteFile(filepath.Join(dir, "api.go"), code["go"], 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(goCmd, "vet", "./"+dir).CombinedOutput(); err != nil {
			t.Errorf("go vet: %v\n%s\n%s", err, out, code["go"])
		}
	})
	t.Run("ts", func(t *testing.T) {
		tsc := filepath.Join("..", "clients", "ts", "node_modules", ".bin", "tsc")
		if _, err := os.Stat(filepath.Join("..", "clients", "ts", "dist", "index.d.ts")); err != nil {
			t.Skip("clients/ts is not built (cd clients/ts && npm ci && npm run build)")
		}
		dir, err := os.MkdirTemp(filepath.Join("..", "clients", "ts"), ".odd")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.WriteFile(filepath.Join(dir, "api.ts"), code["ts"], 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := `{"extends": "../tsconfig.json", "compilerOptions": {"noEmit": true, "rootDir": ".", "types": []}, "include": ["api.ts"]}`
		if err := os.WriteFile(filepath.Join(dir, "tsconfig.json"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(tsc, "-p", dir).CombinedOutput(); err != nil {
			t.Errorf("tsc --strict: %v\n%s\n%s", err, out, code["ts"])
		}
	})
	t.Run("python", func(t *testing.T) {
		if exec.Command("/usr/bin/python3", "-m", "mypy", "--version").Run() != nil {
			t.Skip("no mypy for /usr/bin/python3 (apt-get install python3-mypy)")
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "oddapi.py"), code["python"], 0o644); err != nil {
			t.Fatal(err)
		}
		src, _ := filepath.Abs(filepath.Join("..", "clients", "python", "src"))
		cmd := exec.Command("/usr/bin/python3", "-m", "mypy", "--strict", "--cache-dir", filepath.Join(dir, "cache"), filepath.Join(dir, "oddapi.py"))
		cmd.Env = append(os.Environ(), "MYPYPATH="+src)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("mypy --strict: %v\n%s\n%s", err, out, code["python"])
		}
		run := exec.Command("/usr/bin/python3", "-c", "import oddapi; o = oddapi.GenOdd.from_json({'bytes': 'AAE=', 'x-y': 2, 'class': 'c'}); "+
			"assert (o.bytes, o.x_y, o.class_) == (b'\\x00\\x01', 2, 'c'), o; assert o.to_json()['bytes'] == 'AAE=' and o.to_json()['x-y'] == 2")
		run.Dir, run.Env = dir, append(os.Environ(), "PYTHONPATH="+src)
		if out, err := run.CombinedOutput(); err != nil {
			t.Errorf("the dataclasses do not round-trip: %v\n%s", err, out)
		}
	})
}
