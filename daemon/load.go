package daemon

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/rpcd/rpcd/client"
)

// Load takes every flag of a flag.FlagSet (rpcd serve's: the settings,
// DefineFlags, and flags of its own) also from the environment, from
// systemd's credentials and from a YAML file, generically, so a flag added
// later needs no code here. The precedence is flag > environment >
// credential > file > default:
//
//   - a flag given on the command line wins;
//   - else the environment variable EnvPrefix + the flag's name in upper
//     case with '-' as '_' (RPCD_MAX_CONNS for -max-conns), if set and not
//     empty;
//   - else, for a flag whose value is a file to read (its usage says
//     `file`), the file of the flag's name in $CREDENTIALS_DIRECTORY, where
//     systemd's LoadCredential= puts the files it hands the service
//     (auth-tokens for -auth-tokens);
//   - else the file's key of the flag's name (max-conns: 20000);
//   - else the flag's default.
//
// The file is named by the flag FileFlag (-config) or, failing that, its
// variable $RPCD_CONFIG. Every mistake in it (a key that is no flag, a key
// given twice, a value of the wrong YAML type, a duration or number that
// does not parse, a value the flag refuses) is a ConfigError naming the
// file, the line and the key; so is a bad value in the environment, naming
// the variable. A variable RPCD_… that names no flag, and a credential
// that names no file flag, are warned about: a typo would otherwise be
// ignored.

const (
	// FileFlag is the flag that names the configuration file.
	FileFlag = "config"
	// CredentialsEnv is set by systemd, for a unit with LoadCredential=,
	// to the directory of the credentials it hands the service.
	CredentialsEnv = "CREDENTIALS_DIRECTORY"
)

// TokenEnv is the variable rpcd's clients (rpcd call, client.Security)
// read a token from: it names no flag of serve, and Load does not warn
// about it.
const TokenEnv = client.TokenEnv

// otherEnv are the RPCD_ variables that name no flag of serve but are
// rpcd's all the same, not warned about.
var otherEnv = []string{TokenEnv}

// Sources says where the flags not given on the command line got their
// values: "$RPCD_MAX_CONNS", "$CREDENTIALS_DIRECTORY/auth-tokens" or
// "rpcd.yaml:3", by flag name.
type Sources map[string]string

// Loaded is what Load made of the environment, the credentials and the
// file.
type Loaded struct {
	Sources  Sources
	Warnings []string // what is ignored: unknown variables and credentials
	Err      error    // every mistake, joined (a *ConfigError each); nil for none
	// Fatal says the file could not be read or parsed: the flags it would
	// set are unknown, so checks of their values would mislead.
	Fatal bool

	again // what Again reads again (reload_again.go)
}

// Load sets the flags of fs that the command line did not set from
// environ (os.Environ's form), then from the credentials in
// $CREDENTIALS_DIRECTORY, then from the file named by the flag FileFlag or
// its variable, if fs defines it. fs has been parsed.
func Load(fs *flag.FlagSet, environ []string) *Loaded {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	given := map[string]bool{}
	conf := &Loaded{Sources: Sources{}, again: again{fs: fs, environ: environ, args: map[string]string{}}}
	fs.Visit(func(f *flag.Flag) { given[f.Name], conf.args[f.Name] = true, f.Value.String() })
	var errs []error

	known := map[string]bool{}
	for _, name := range otherEnv {
		known[name] = true
	}
	fs.VisitAll(func(f *flag.Flag) {
		name := EnvName(f.Name)
		known[name] = true
		v := env[name]
		if given[f.Name] || v == "" {
			return
		}
		if err := setFlag(fs, f, v); err != nil {
			errs = append(errs, configErrorf("$%s: %v", name, err))
			return
		}
		given[f.Name] = true
		conf.Sources[f.Name] = "$" + name
	})
	conf.Warnings = unknownEnv(env, known)

	if dir := env[CredentialsEnv]; dir != "" {
		warnings, err := applyCredentials(fs, dir, given, conf.Sources)
		conf.Warnings = append(conf.Warnings, warnings...)
		if err != nil {
			conf.Err, conf.Fatal = errors.Join(append(errs, err)...), true
			return conf
		}
	}

	file := ""
	if f := fs.Lookup(FileFlag); f != nil {
		file = f.Value.String()
	}
	if file == "" {
		conf.Err = errors.Join(errs...)
		return conf
	}
	data, err := os.ReadFile(file)
	if err != nil {
		conf.Err, conf.Fatal = errors.Join(append(errs, configErrorf("%s: %v", key(FileFlag), err))...), true
		return conf
	}
	entries, fileErrs, err := parseConfig(file, data)
	if err != nil {
		conf.Err, conf.Fatal = errors.Join(append(errs, err)...), true
		return conf
	}
	errs = append(errs, fileErrs...)
	for _, e := range entries {
		f := fs.Lookup(e.key)
		at := fmt.Sprintf("%s:%d", file, e.line)
		switch {
		case e.first != 0:
			errs = append(errs, configErrorf("%s: key %q again (first on line %d)", at, e.key, e.first))
			continue
		case f == nil:
			errs = append(errs, configErrorf("%s: unknown key %q: the keys are the flags of \"%s -h\", without the dash", at, e.key, fs.Name()))
			continue
		case e.key == FileFlag:
			errs = append(errs, configErrorf("%s: key %q: a configuration file cannot name another", at, e.key))
			continue
		}
		text, err := scalarFor(f, e.value)
		if err == nil && !given[e.key] {
			err = setFlag(fs, f, text)
		}
		if err != nil {
			errs = append(errs, configErrorf("%s: %s: %v", at, e.key, err))
			continue
		}
		if !given[e.key] {
			conf.Sources[e.key] = at
		}
	}
	conf.Err = errors.Join(errs...)
	return conf
}

// unknownEnv returns a warning for each variable of env that begins with
// envPrefix, is not empty, and is not known; sorted.
func unknownEnv(env map[string]string, known map[string]bool) []string {
	var warnings []string
	for name, v := range env {
		if !strings.HasPrefix(name, EnvPrefix) || v == "" || known[name] {
			continue
		}
		w := fmt.Sprintf("$%s is set, but rpcd has no such variable: it is ignored", name)
		if near := nearest(name, known); near != "" {
			w += fmt.Sprintf(" (did you mean $%s?)", near)
		}
		warnings = append(warnings, w)
	}
	sort.Strings(warnings)
	return warnings
}

// nearest returns the name of known closest to name, if it is at most
// two edits away; "" if none is.
func nearest(name string, known map[string]bool) string {
	best, bestD := "", 3
	for k := range known {
		if d := editDistance(name, k); d < bestD || d == bestD && k < best {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// isFileFlag reports whether f's value names a file: its usage says
// `file` (flag.UnquoteUsage).
func isFileFlag(f *flag.Flag) bool {
	name, _ := flag.UnquoteUsage(f)
	return name == "file"
}

// applyCredentials sets each file flag of fs not yet given that has a
// credential of its name in dir (systemd's $CREDENTIALS_DIRECTORY) to that
// credential's path, and returns a warning for each credential that names
// no file flag. A directory that cannot be read is a usage error.
func applyCredentials(fs *flag.FlagSet, dir string, given map[string]bool, src Sources) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, configErrorf("$%s: %v", CredentialsEnv, err)
	}
	var warnings []string
	for _, e := range entries {
		name := e.Name()
		f := fs.Lookup(name)
		if f == nil || !isFileFlag(f) {
			warnings = append(warnings, fmt.Sprintf("the credential %s (in $%s) names no file flag of %q: it is ignored", name, CredentialsEnv, fs.Name()))
			continue
		}
		if given[name] {
			continue
		}
		if err := fs.Set(name, filepath.Join(dir, name)); err != nil {
			return warnings, configErrorf("$%s/%s: %v", CredentialsEnv, name, err)
		}
		given[name] = true
		src[name] = "$" + CredentialsEnv + "/" + name
	}
	return warnings, nil
}

// configEntry is one key of a configuration file.
type configEntry struct {
	key   string
	line  int
	value ast.Node
	first int // the line the key was first given on, if this is a repeat; else 0
}

// parseConfig parses a configuration file: one YAML mapping of flag names
// to scalars, each key once. An empty file is an empty mapping. It returns
// the entries in the file's order (a key given again among them, with the
// line of its first), the keys that are no names, and an error if the file
// is not such a mapping at all.
func parseConfig(file string, data []byte) ([]configEntry, []error, error) {
	// Keys given twice are found below, in the words of the other mistakes.
	f, err := parser.ParseBytes(data, 0, parser.AllowDuplicateMapKey())
	if err != nil {
		return nil, nil, configErrorf("%s: %s", file, yamlError(err))
	}
	if len(f.Docs) > 1 {
		return nil, nil, configErrorf("%s: %d YAML documents, want one", file, len(f.Docs))
	}
	if len(f.Docs) == 0 || f.Docs[0].Body == nil {
		return nil, nil, nil
	}
	var pairs []*ast.MappingValueNode
	switch body := f.Docs[0].Body.(type) {
	case *ast.MappingNode:
		pairs = body.Values
	case *ast.MappingValueNode:
		pairs = []*ast.MappingValueNode{body}
	case *ast.CommentGroupNode: // comments alone
		return nil, nil, nil
	default:
		return nil, nil, configErrorf("%s:%d: want a mapping of keys to values, got %s", file, body.GetToken().Position.Line, kindOf(body))
	}
	seen := map[string]int{}
	out := make([]configEntry, 0, len(pairs))
	var errs []error
	for _, p := range pairs {
		line := p.Key.GetToken().Position.Line
		key, ok := p.Key.(*ast.StringNode)
		if !ok {
			errs = append(errs, configErrorf("%s:%d: key %s is not a name", file, line, p.Key.String()))
			continue
		}
		first, dup := seen[key.Value]
		if !dup {
			seen[key.Value] = line
		}
		out = append(out, configEntry{key: key.Value, line: line, value: p.Value, first: first})
	}
	return out, errs, nil
}

// yamlError is the message of a YAML syntax error, with its line and
// column but not the source excerpt.
func yamlError(err error) string {
	var ye yaml.Error
	if errors.As(err, &ye) {
		if tk := ye.GetToken(); tk != nil {
			return fmt.Sprintf("line %d, column %d: %s", tk.Position.Line, tk.Position.Column, ye.GetMessage())
		}
		return ye.GetMessage()
	}
	return err.Error()
}

// scalarFor returns the text to give flag f's Set for the YAML value v,
// or why v does not fit f's type: a string flag takes a string, a number
// flag a number, a boolean flag true or false, a duration flag a string
// such as "1m30s" (or 0).
func scalarFor(f *flag.Flag, v ast.Node) (string, error) {
	v = unwrap(v)
	getter, _ := f.Value.(flag.Getter)
	var zero any
	if getter != nil {
		zero = getter.Get()
	}
	switch n := v.(type) {
	case *ast.StringNode:
		switch zero.(type) {
		case string, time.Duration, nil:
			return n.Value, nil
		}
	case *ast.LiteralNode: // a block scalar: | or >
		switch zero.(type) {
		case string, nil:
			return n.Value.Value, nil
		}
	case *ast.IntegerNode:
		text := fmt.Sprint(n.Value)
		switch zero.(type) {
		case int, int64, uint, uint64, float64, nil:
			return text, nil
		case time.Duration:
			if text == "0" {
				return text, nil
			}
			return "", fmt.Errorf("invalid duration %s: want a string with a unit, such as \"%ss\"", text, text)
		}
	case *ast.FloatNode:
		switch zero.(type) {
		case float64, nil:
			return strconv.FormatFloat(n.Value, 'g', -1, 64), nil
		}
	case *ast.BoolNode:
		switch zero.(type) {
		case bool, nil:
			return strconv.FormatBool(n.Value), nil
		}
	}
	return "", fmt.Errorf("want %s, got %s", wantOf(zero), kindOf(v))
}

// unwrap returns the value under tags and anchors.
func unwrap(v ast.Node) ast.Node {
	for {
		switch n := v.(type) {
		case *ast.TagNode:
			v = n.Value
		case *ast.AnchorNode:
			v = n.Value
		default:
			return v
		}
	}
}

// wantOf names the YAML a flag whose value has zero's type takes.
func wantOf(zero any) string {
	switch zero.(type) {
	case string:
		return "a string (quote a value that YAML reads as a number or a boolean)"
	case int, int64, uint, uint64:
		return "an integer"
	case float64:
		return "a number"
	case bool:
		return "true or false"
	case time.Duration:
		return "a duration such as \"10s\""
	}
	return "a scalar"
}

// kindOf names the YAML kind of v, for messages.
func kindOf(v ast.Node) string {
	switch n := v.(type) {
	case nil, *ast.NullNode:
		return "no value"
	case *ast.StringNode:
		return fmt.Sprintf("the string %q", n.Value)
	case *ast.LiteralNode:
		return "a block string"
	case *ast.IntegerNode:
		return fmt.Sprintf("the integer %v", n.Value)
	case *ast.FloatNode:
		return fmt.Sprintf("the number %v", n.Value)
	case *ast.BoolNode:
		return fmt.Sprintf("the boolean %v", n.Value)
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.AliasNode:
		return "an alias"
	}
	return "a " + v.Type().String()
}

// setFlag sets f from text, with messages better than flag's own
// "parse error" for numbers and durations.
func setFlag(fs *flag.FlagSet, f *flag.Flag, text string) error {
	if getter, ok := f.Value.(flag.Getter); ok {
		var err error
		switch getter.Get().(type) {
		case time.Duration:
			_, err = time.ParseDuration(text)
			if err != nil {
				err = fmt.Errorf("invalid duration %q: want a number and a unit, such as \"10s\" or \"1m30s\"", text)
			}
		case int, int64:
			_, err = strconv.ParseInt(text, 0, strconv.IntSize)
		case uint, uint64:
			_, err = strconv.ParseUint(text, 0, strconv.IntSize)
		case float64:
			_, err = strconv.ParseFloat(text, 64)
		case bool:
			_, err = strconv.ParseBool(text)
		}
		if ne := (*strconv.NumError)(nil); errors.As(err, &ne) {
			err = fmt.Errorf("invalid value %q: %v", text, ne.Err)
		}
		if err != nil {
			return err
		}
	}
	if err := fs.Set(f.Name, text); err != nil {
		return fmt.Errorf("invalid value %q: %v", text, err)
	}
	return nil
}

// flagMention finds the flags a usage message names: "-max-conns".
var flagMention = regexp.MustCompile(`(?:^|[^A-Za-z0-9-])-([a-z][a-z0-9-]*)`)

// Attribute appends to a message naming flags ("-loops") that came from
// the environment or the file where each came from, so that a value
// refused after parsing (-loops -1, -log-level loud) is traced to its key:
// "(-loops from rpcd.yaml:3)".
func (src Sources) Attribute(msg string) string {
	if len(src) == 0 {
		return msg
	}
	var from []string
	seen := map[string]bool{}
	for _, m := range flagMention.FindAllStringSubmatch(msg, -1) {
		name := m[1]
		if where, ok := src[name]; ok && !seen[name] {
			seen[name] = true
			from = append(from, "-"+name+" from "+where)
		}
	}
	if len(from) == 0 {
		return msg
	}
	sort.Strings(from)
	return msg + " (" + strings.Join(from, ", ") + ")"
}
