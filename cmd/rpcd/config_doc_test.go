package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// yamlBlocks returns the ```yaml blocks of a Markdown file.
func yamlBlocks(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// TestConfigDocExample checks that the full example of
// docs/configuration.md loads, names every flag of rpcd serve with its
// default and its environment variable, and that the short examples
// (there and dist/rpcd.yaml) load.
func TestConfigDocExample(t *testing.T) {
	blocks := yamlBlocks(t, filepath.Join("..", "..", "docs", "configuration.md"))
	if len(blocks) < 2 {
		t.Fatalf("docs/configuration.md has %d yaml blocks, want the full file and a short one", len(blocks))
	}
	full := blocks[0]
	fs, _, err := serveFlagSet(t, nil, []string{"-config", writeConfig(t, full)}, nil)
	if err != nil {
		t.Fatalf("the full example does not load: %v", err)
	}
	keys := map[string]string{} // key -> its line
	for _, line := range strings.Split(full, "\n") {
		if k, _, ok := strings.Cut(line, ":"); ok && k != "" && !strings.HasPrefix(k, "#") {
			keys[k] = line
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == configFlag {
			return
		}
		line, ok := keys[f.Name]
		switch {
		case !ok:
			t.Errorf("the full example lacks the key %s (environment %s, default %q)", f.Name, envName(f.Name), f.DefValue)
		case f.Value.String() != f.DefValue:
			t.Errorf("the full example gives %s = %q, not its default %q", f.Name, f.Value.String(), f.DefValue)
		case !strings.Contains(line, "# "+envName(f.Name)+":"):
			t.Errorf("the full example's line for %s does not name %s: %q", f.Name, envName(f.Name), line)
		}
	})

	dist, err := os.ReadFile(filepath.Join("..", "..", "dist", "rpcd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if string(dist) != blocks[1] {
		t.Errorf("the short example in docs/configuration.md is not dist/rpcd.yaml:\n%s\nagainst\n%s", blocks[1], dist)
	}
	if _, _, err := serveFlagSet(t, nil, []string{"-config", writeConfig(t, string(dist))}, nil); err != nil {
		t.Errorf("dist/rpcd.yaml does not load: %v", err)
	}
}

// TestInstallable checks what `go install github.com/rpcd/rpcd/cmd/rpcd@latest`
// needs of the main module: go.mod has no replace or exclude directive
// (.ci/run also installs ./cmd/rpcd into an empty GOBIN and runs it).
func TestInstallable(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	for i, line := range strings.Split(string(b), "\n") {
		if w := strings.Fields(line); len(w) > 0 && (w[0] == "replace" || w[0] == "exclude") {
			t.Errorf("go.mod:%d: %q: go install …@latest refuses a module with %s directives", i+1, line, w[0])
		}
	}
	if !strings.HasPrefix(string(b), "module github.com/rpcd/rpcd\n") {
		t.Errorf("go.mod does not begin with the module path github.com/rpcd/rpcd")
	}
}

// TestUnitDoc checks that the unit docs/configuration.md shows is
// dist/rpcd.service: the same settings, in the same order, the comments
// aside (the page shows a few commented settings too).
func TestUnitDoc(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```ini\n(\\[Unit\\].*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/configuration.md shows no unit (an ```ini block beginning [Unit])")
	}
	unit, err := os.ReadFile(filepath.Join("..", "..", "dist", "rpcd.service"))
	if err != nil {
		t.Fatal(err)
	}
	settings := func(text string) []string {
		var out []string
		for _, line := range strings.Split(text, "\n") {
			line = strings.TrimSpace(line)
			if line != "" && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "Documentation=") {
				out = append(out, line)
			}
		}
		return out
	}
	got, want := strings.Join(settings(string(m[1])), "\n"), strings.Join(settings(string(unit)), "\n")
	if got != want {
		t.Errorf("the unit in docs/configuration.md:\n%s\n\nis not dist/rpcd.service's:\n%s", got, want)
	}
}
