package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// page is the map this test keeps true, relative to the module's root.
const page = "docs/architecture.md"

// gnet is the import path prefix of gnet, whatever its major version.
const gnet = "github.com/panjf2000/gnet"

// listed is a package as `go list -json` describes it.
type listed struct {
	ImportPath     string
	Dir            string
	GoFiles        []string
	CgoFiles       []string
	IgnoredGoFiles []string // files other build constraints select
	TestGoFiles    []string
	XTestGoFiles   []string
}

// pkg is one package of the module with the imports of its files.
type pkg struct {
	path  string              // relative to the module: "handler/builtin"
	code  map[string][]string // import path -> the package's files that import it (tests excluded)
	files []string            // its files, tests excluded, relative to the module
	test  map[string][]string // the same for its _test.go files
}

// module is the module under test.
type module struct {
	path string // "github.com/rpcd/rpcd"
	root string // its directory
	pkgs []*pkg
}

// inModule returns imp relative to the module, and whether it is one of
// the module's packages.
func (m *module) inModule(imp string) (string, bool) {
	if imp == m.path {
		return ".", true
	}
	return strings.CutPrefix(imp, m.path+"/")
}

// pkg returns the package at rel, failing the test if there is none.
func (m *module) pkg(t *testing.T, rel string) *pkg {
	t.Helper()
	for _, p := range m.pkgs {
		if p.path == rel {
			return p
		}
	}
	t.Fatalf("no package %s in module %s: a rule of %s names a package that is gone; update the rule and the page", rel, m.path, page)
	return nil
}

// load lists the module's packages and reads their imports from their
// source files, those of every build constraint included. It skips the
// test without the go command.
func load(t *testing.T) *module {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: the layout of the module cannot be listed")
	}
	gomod, err := exec.Command(goCmd, "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	list := exec.Command(goCmd, "list", "-m")
	list.Dir = root
	modPath, err := list.Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	m := &module{path: strings.TrimSpace(string(modPath)), root: root}

	cmd := exec.Command(goCmd, "list", "-json", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -json ./... in %s: %v\n%s", root, err, stderr.Bytes())
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var l listed
		if err := dec.Decode(&l); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("reading go list's output: %v", err)
		}
		rel, ok := m.inModule(l.ImportPath)
		if !ok {
			t.Fatalf("go list ./... in %s listed %s, not a package of module %s", root, l.ImportPath, m.path)
		}
		p := &pkg{path: rel, code: map[string][]string{}, test: map[string][]string{}}
		files := slices.Concat(l.GoFiles, l.CgoFiles, l.IgnoredGoFiles, l.TestGoFiles, l.XTestGoFiles)
		for _, name := range files {
			imports := p.code
			if strings.HasSuffix(name, "_test.go") {
				imports = p.test
			} else {
				p.files = append(p.files, filepath.Join(rel, name))
			}
			for _, imp := range fileImports(t, filepath.Join(l.Dir, name)) {
				imports[imp] = append(imports[imp], filepath.Join(rel, name))
			}
		}
		m.pkgs = append(m.pkgs, p)
	}
	if len(m.pkgs) == 0 {
		t.Fatalf("go list ./... in %s listed no packages", root)
	}
	return m
}

// fileImports returns the import paths of a Go source file.
func fileImports(t *testing.T, file string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatalf("reading the imports of %s: %v", file, err)
	}
	var paths []string
	for _, spec := range f.Imports {
		path, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			t.Fatalf("%s: import %s: %v", file, spec.Path.Value, err)
		}
		paths = append(paths, path)
	}
	return paths
}

// TestPageNamesEveryPackage: docs/architecture.md names every package of
// the module, in backquotes, with or without a final slash.
func TestPageNamesEveryPackage(t *testing.T) {
	m := load(t)
	text, err := os.ReadFile(filepath.Join(m.root, page))
	if err != nil {
		t.Fatalf("%v: the map of the house is missing", err)
	}
	for _, p := range m.pkgs {
		if p.path == "." {
			continue // the module's root package, if it ever has one, is the module
		}
		if !bytes.Contains(text, []byte("`"+p.path+"`")) && !bytes.Contains(text, []byte("`"+p.path+"/`")) {
			t.Errorf("%s does not name package %s: add it, as `%s`, with its one concept and what it imports", page, p.path, p.path)
		}
	}
}

// TestImportRules checks the rules of the house on the imports of every
// package's files.
func TestImportRules(t *testing.T) {
	m := load(t)

	t.Run("gnet only in reactor", func(t *testing.T) {
		for _, p := range m.pkgs {
			if p.path == "reactor" {
				continue
			}
			for _, imports := range []map[string][]string{p.code, p.test} {
				for imp, files := range imports {
					if imp == gnet || strings.HasPrefix(imp, gnet+"/") {
						t.Errorf("package %s imports %s (%s): only reactor may import gnet", p.path, imp, strings.Join(files, ", "))
					}
				}
			}
		}
	})

	t.Run("proto imports nothing of the project and does no I/O", func(t *testing.T) {
		p := m.pkg(t, "proto")
		for imp, files := range p.code {
			if rel, ok := m.inModule(imp); ok {
				t.Errorf("package proto imports %s (%s): proto imports no package of the module", rel, strings.Join(files, ", "))
			}
			if doesIO(imp) {
				t.Errorf("package proto imports %s (%s): proto does no I/O", imp, strings.Join(files, ", "))
			}
		}
	})

	t.Run("handler knows no transport", func(t *testing.T) {
		for _, rel := range []string{"handler", "handler/builtin", "handler/schema", "handler/transport"} {
			p := m.pkg(t, rel)
			for imp, files := range p.code {
				if dep, ok := m.inModule(imp); ok && slices.Contains([]string{"reactor", "client", "gateway", "ws"}, dep) {
					t.Errorf("package %s imports %s (%s): %s knows no transport", rel, dep, strings.Join(files, ", "), rel)
				}
				if strings.HasPrefix(imp, "net/") {
					t.Errorf("package %s imports %s (%s): %s knows no transport", rel, imp, strings.Join(files, ", "), rel)
				}
			}
			for _, file := range p.code["net"] {
				for _, use := range netUses(t, m.root, file) {
					t.Errorf("package %s uses %s (%s): %s knows no transport; of package net it may use the type net.Addr alone", rel, use.name, use.pos, rel)
				}
			}
		}
	})

	t.Run("handler's state is reached by its subpackages alone", func(t *testing.T) {
		const state = "internal/handlerstate"
		m.pkg(t, state)
		for _, p := range m.pkgs {
			if slices.Contains([]string{"handler", "handler/schema", "handler/transport", state}, p.path) {
				continue
			}
			for _, imports := range []map[string][]string{p.code, p.test} {
				for imp, files := range imports {
					if dep, ok := m.inModule(imp); ok && dep == state {
						t.Errorf("package %s imports %s (%s): only handler, handler/schema and handler/transport reach handler's state", p.path, dep, strings.Join(files, ", "))
					}
				}
			}
		}
	})

	forbid := func(t *testing.T, pkgs, deps []string, why string) {
		for _, rel := range pkgs {
			p := m.pkg(t, rel)
			for imp, files := range p.code {
				if dep, ok := m.inModule(imp); ok && slices.Contains(deps, dep) {
					t.Errorf("package %s imports %s (%s): %s", rel, dep, strings.Join(files, ", "), why)
				}
			}
		}
	}
	t.Run("server middleware imports no client", func(t *testing.T) {
		forbid(t, []string{"metrics", "otelrpcd", "ratelimit", "auth"}, []string{"client"},
			"server middleware imports no client (its client half goes in a package of its own, as metrics/clientmetrics and otelrpcd/otelclient)")
	})
	t.Run("the generators know no transport", func(t *testing.T) {
		forbid(t, []string{"gen"}, []string{"reactor", "client", "gateway", "ws", "daemon"},
			"gen writes code from descriptions; it calls a server through handler.Caller, not a transport of its own")
	})
	t.Run("record knows no server", func(t *testing.T) {
		forbid(t, []string{"record"}, []string{"reactor", "client", "gateway", "ws", "admin", "daemon"},
			"record is a file and a tap: a server feeds it through transport.Tap, its proxy speaks TCP; only its tests may start a server")
	})
	t.Run("client imports no reactor", func(t *testing.T) {
		forbid(t, []string{"client"}, []string{"reactor"}, "the client never imports the server")
	})
	t.Run("reactor and gateway do not import auth", func(t *testing.T) {
		forbid(t, []string{"reactor", "gateway"}, []string{"auth"},
			"reactor and gateway take handler.Authenticator and handler.TopicPolicy, which auth implements, not auth itself")
	})
	t.Run("daemon is the top of the library", func(t *testing.T) {
		m.pkg(t, "daemon")
		for _, p := range m.pkgs {
			if p.path == "cmd/rpcd" || p.path == "daemon" {
				continue
			}
			for _, imports := range []map[string][]string{p.code, p.test} {
				if files := imports[m.path+"/daemon"]; len(files) > 0 {
					t.Errorf("package %s imports daemon (%s): only cmd/rpcd does; daemon puts the library together, nothing below it may need it", p.path, strings.Join(files, ", "))
				}
			}
		}
	})

	// The protocol's steps that both ends take are written once, in
	// internal/engine: the server and the client use them there, not
	// the calls and stream methods they are made of.
	t.Run("protocol steps only in internal/engine", func(t *testing.T) {
		for _, rel := range []string{"reactor", "client"} {
			for _, file := range m.pkg(t, rel).files {
				for _, use := range engineSteps(t, m.root, file) {
					t.Errorf("package %s uses %s (%s): a step both ends take belongs in internal/engine, which %s calls", rel, use.name, use.pos, rel)
				}
			}
		}
	})
}

// engineOnly are the names, qualified by their package, that make up the
// steps internal/engine takes for both ends: opening, accepting and
// feeding streams; trace context; the checks of an outgoing call.
var engineOnly = map[string][]string{
	"proto":   {"AppendStreamOpen", "AppendFirstStreamCredit", "AppendStreamCredit", "AppendStreamReset", "MetaTraceParent", "MetaTraceState", "MetaBaggage"},
	"stream":  {"New"},
	"handler": {"ValidRoute"},
}

// engineMethods are the methods that move a peer's frames into a stream's
// state, and read a stream frame's window.
var engineMethods = []string{"OnData", "OnCredit", "OnEnd", "OnReset", "StreamWindow"}

// engineSteps returns the uses in file, a path relative to the module's
// root, of the names internal/engine alone may use, and the deadline a
// frame's Deadline field gives (time.Duration(f.Deadline)), which
// engine.Deadline computes.
func engineSteps(t *testing.T, root, file string) []nameUse {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(root, file), nil, 0)
	if err != nil {
		t.Fatalf("reading %s: %v", file, err)
	}
	at := func(p token.Pos) string { return file + ":" + strconv.Itoa(fset.Position(p).Line) }
	var uses []nameUse
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok && slices.Contains(engineOnly[x.Name], n.Sel.Name) {
				uses = append(uses, nameUse{name: x.Name + "." + n.Sel.Name, pos: at(n.Pos())})
			}
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok {
				break
			}
			if slices.Contains(engineMethods, sel.Sel.Name) {
				uses = append(uses, nameUse{name: "the method " + sel.Sel.Name, pos: at(n.Pos())})
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "time" && sel.Sel.Name == "Duration" && len(n.Args) == 1 {
				if arg, ok := n.Args[0].(*ast.SelectorExpr); ok && arg.Sel.Name == "Deadline" {
					uses = append(uses, nameUse{name: "time.Duration(….Deadline)", pos: at(n.Pos())})
				}
			}
		}
		return true
	})
	return uses
}

// doesIO reports whether a standard library or x/sys package does I/O.
func doesIO(imp string) bool {
	for _, p := range []string{"net", "os", "syscall", "golang.org/x/sys"} {
		if imp == p || strings.HasPrefix(imp, p+"/") {
			return true
		}
	}
	return false
}

// nameUse is a use of a name a rule forbids, and where it is.
type nameUse struct {
	name string // "net.Dial", or how the import is spelled
	pos  string
}

// netUses returns the uses of package net other than net.Addr in file,
// a path relative to the module's root.
func netUses(t *testing.T, root, file string) []nameUse {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(root, file), nil, 0)
	if err != nil {
		t.Fatalf("reading %s: %v", file, err)
	}
	at := func(p token.Pos) string {
		pos := fset.Position(p)
		return file + ":" + strconv.Itoa(pos.Line)
	}
	name := "net"
	var uses []nameUse
	for _, spec := range f.Imports {
		if spec.Path.Value != `"net"` || spec.Name == nil {
			continue
		}
		if spec.Name.Name == "." || spec.Name.Name == "_" {
			return []nameUse{{name: "import " + spec.Name.Name + ` "net"`, pos: at(spec.Pos())}}
		}
		name = spec.Name.Name
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && x.Name == name && sel.Sel.Name != "Addr" {
			uses = append(uses, nameUse{name: "net." + sel.Sel.Name, pos: at(sel.Pos())})
		}
		return true
	})
	return uses
}
