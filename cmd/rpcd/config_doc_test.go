package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	rpcdaemon "github.com/rpcd/rpcd/daemon"
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

// updateDocs has TestConfigDocReference write docs/configuration.md's
// reference instead of comparing it: go test ./cmd/rpcd -run
// TestConfigDocReference -update-docs.
var updateDocs = flag.Bool("update-docs", false, "write docs/configuration.md's reference of the settings")

// groupHeadings are the headings of the reference, by Setting.Group.
var groupHeadings = map[string]string{
	"Listening": "Listening",
	"Limits":    `Limits (docs/reliability.md, "Limits and their defaults")`,
	"Logs":      "Logs",
	"Upgrades":  `Upgrades (docs/operating.md, "Upgrades")`,
	"Security":  `TLS and authentication (docs/reliability.md, "Security"); the gateway requires the same`,
	"Etcd":      "Service discovery in etcd (docs/scale-out.md)",
	"Admin":     `The admin listener's authentication, and recording (docs/operating.md, "Recording traffic")`,
	"":          "Testing", // serve's own flags
}

// serveReference is docs/configuration.md's reference of serve's
// settings, a YAML file of every key at its default: the settings'
// table (rpcdaemon.Settings), then serve's own flags but -config.
func serveReference() string {
	fs := flag.NewFlagSet("rpcd serve", flag.ContinueOnError)
	setupServe(fs)
	type row struct{ group, key, def, env, help string }
	var rows []row
	for _, s := range rpcdaemon.Settings() {
		rows = append(rows, row{s.Group, s.Key, s.Default, s.Env, s.Help})
	}
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := rpcdaemon.Lookup(f.Name); !ok && f.Name != rpcdaemon.FileFlag {
			rows = append(rows, row{"", f.Name, f.DefValue, rpcdaemon.EnvName(f.Name), f.Usage})
		}
	})
	var b strings.Builder
	b.WriteString("# rpcd serve -config rpcd.yaml\n# key: default                     # environment variable: what it is\n")
	group := "-"
	for _, r := range rows {
		if r.group != group {
			group = r.group
			fmt.Fprintf(&b, "\n# %s\n", groupHeadings[group])
		}
		if r.def == "" {
			r.def = `""`
		}
		fmt.Fprintf(&b, "%-34s # %s: %s\n", r.key+": "+r.def, r.env, strings.ReplaceAll(r.help, "`", ""))
	}
	return b.String()
}

// TestConfigDocReference checks that docs/configuration.md's reference of
// the settings is serveReference, made from the settings' table (with
// -update-docs, writes it); that it loads, and names every flag of rpcd
// serve at its default; and that the short examples (there and
// dist/rpcd.yaml) load.
func TestConfigDocReference(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "configuration.md")
	blocks := yamlBlocks(t, path)
	if len(blocks) < 2 {
		t.Fatalf("docs/configuration.md has %d yaml blocks, want the reference and a short one", len(blocks))
	}
	want := serveReference()
	if *updateDocs && blocks[0] != want {
		doc, _ := os.ReadFile(path)
		doc = []byte(strings.Replace(string(doc), "```yaml\n"+blocks[0]+"```", "```yaml\n"+want+"```", 1))
		if err := os.WriteFile(path, doc, 0o644); err != nil {
			t.Fatal(err)
		}
		blocks[0] = want
	}
	if blocks[0] != want {
		t.Errorf("docs/configuration.md's reference is not the settings' table; run go test ./cmd/rpcd -run TestConfigDocReference -update-docs\n got:\n%s\nwant:\n%s", blocks[0], want)
	}
	fs, err := loadServeFlags(t, blocks[0])
	if err != nil {
		t.Fatalf("the reference does not load: %v", err)
	}
	keys := map[string]bool{}
	for _, line := range strings.Split(blocks[0], "\n") {
		if k, _, ok := strings.Cut(line, ":"); ok && k != "" && !strings.HasPrefix(k, "#") {
			keys[k] = true
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		switch {
		case f.Name == rpcdaemon.FileFlag:
		case !keys[f.Name]:
			t.Errorf("the reference lacks the key %s", f.Name)
		case f.Value.String() != f.DefValue:
			t.Errorf("the reference gives %s = %q, not its default %q", f.Name, f.Value.String(), f.DefValue)
		}
	})

	dist, err := os.ReadFile(filepath.Join("..", "..", "dist", "rpcd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if string(dist) != blocks[1] {
		t.Errorf("the short example in docs/configuration.md is not dist/rpcd.yaml:\n%s\nagainst\n%s", blocks[1], dist)
	}
	if _, err := loadServeFlags(t, string(dist)); err != nil {
		t.Errorf("dist/rpcd.yaml does not load: %v", err)
	}
}

// TestServeFlagsAreSettings checks that rpcd serve's flags are the
// settings' table (rpcdaemon.Settings), each with its help and default,
// and two of serve's own.
func TestServeFlagsAreSettings(t *testing.T) {
	fs := flag.NewFlagSet("rpcd serve", flag.ContinueOnError)
	setupServe(fs)
	n := 0
	for _, s := range rpcdaemon.Settings() {
		n++
		f := fs.Lookup(s.Key)
		switch {
		case f == nil:
			t.Errorf("setting %s is no flag of rpcd serve", s.Key)
		case f.Usage != s.Help || f.DefValue != s.Default:
			t.Errorf("-%s: usage %q, default %q; the setting's help %q, default %q", s.Key, f.Usage, f.DefValue, s.Help, s.Default)
		}
	}
	var own []string
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := rpcdaemon.Lookup(f.Name); !ok {
			own = append(own, f.Name)
		}
	})
	if strings.Join(own, " ") != "chaos-ledger config" {
		t.Errorf("serve's flags that are no setting: %q, want chaos-ledger and config", own)
	}
}

// loadServeFlags loads the configuration file text over serve's flags.
func loadServeFlags(t *testing.T, text string) (*flag.FlagSet, error) {
	t.Helper()
	fs := flag.NewFlagSet("rpcd serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	setupServe(fs)
	if err := fs.Parse([]string{"-config", writeConfig(t, text)}); err != nil {
		t.Fatal(err)
	}
	return fs, rpcdaemon.Load(fs, nil).Err
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
