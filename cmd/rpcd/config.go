package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// A command that defines a -config flag (serve) takes every one of its
// flags also from the environment and from a YAML file, generically over its
// flag.FlagSet, so a flag added later needs no code here. The precedence is
// flag > environment > file > default:
//
//   - a flag given on the command line wins;
//   - else the environment variable envPrefix + the flag's name in upper
//     case with '-' as '_' (RPCD_MAX_CONNS for -max-conns), if set and not
//     empty;
//   - else the file's key of the flag's name (max-conns: 20000);
//   - else the flag's default.
//
// The file is named by -config or, failing that, $RPCD_CONFIG. Every
// mistake in it (a key that is no flag, a value of the wrong YAML type, a
// duration or number that does not parse, a value the flag refuses) stops
// the command with a usage error (exit status 2) naming the file, the line
// and the key; so does a bad value in the environment, naming the variable.

const (
	configFlag = "config" // the flag that names the file
	envPrefix  = "RPCD_"
)

// envName returns the environment variable that sets the flag name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// configSources says where the flags not given on the command line got
// their values: "$RPCD_MAX_CONNS" or "rpcd.yaml:3", by flag name.
type configSources map[string]string

// applyConfig sets the flags of fs that the command line did not set from
// the environment (read through lookupEnv) and then from the file named by
// -config or $RPCD_CONFIG. fs has been parsed and defines -config.
func applyConfig(fs *flag.FlagSet, lookupEnv func(string) (string, bool)) (configSources, error) {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	src := configSources{}

	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || envErr != nil {
			return
		}
		name := envName(f.Name)
		v, ok := lookupEnv(name)
		if !ok || v == "" {
			return
		}
		if err := setFlag(fs, f, v); err != nil {
			envErr = usagef("$%s: %v", name, err)
			return
		}
		given[f.Name] = true
		src[f.Name] = "$" + name
	})
	if envErr != nil {
		return nil, envErr
	}

	file := fs.Lookup(configFlag).Value.String()
	if file == "" {
		return src, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, usagef("-config: %v", err)
	}
	entries, err := parseConfig(file, data)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		f := fs.Lookup(e.key)
		at := fmt.Sprintf("%s:%d", file, e.line)
		switch {
		case f == nil:
			return nil, usagef("%s: unknown key %q: the keys are the flags of \"rpcd %s -h\", without the dash", at, e.key, strings.TrimPrefix(fs.Name(), "rpcd "))
		case e.key == configFlag:
			return nil, usagef("%s: key %q: a configuration file cannot name another", at, e.key)
		}
		text, err := scalarFor(f, e.value)
		if err == nil && !given[e.key] {
			err = setFlag(fs, f, text)
		}
		if err != nil {
			return nil, usagef("%s: %s: %v", at, e.key, err)
		}
		if !given[e.key] {
			src[e.key] = at
		}
	}
	return src, nil
}

// configEntry is one key of a configuration file.
type configEntry struct {
	key   string
	line  int
	value ast.Node
}

// parseConfig parses a configuration file: one YAML mapping of flag names
// to scalars, each key once. An empty file is an empty mapping.
func parseConfig(file string, data []byte) ([]configEntry, error) {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, usagef("%s: %s", file, yamlError(err))
	}
	if len(f.Docs) > 1 {
		return nil, usagef("%s: %d YAML documents, want one", file, len(f.Docs))
	}
	if len(f.Docs) == 0 || f.Docs[0].Body == nil {
		return nil, nil
	}
	var pairs []*ast.MappingValueNode
	switch body := f.Docs[0].Body.(type) {
	case *ast.MappingNode:
		pairs = body.Values
	case *ast.MappingValueNode:
		pairs = []*ast.MappingValueNode{body}
	case *ast.CommentGroupNode: // comments alone
		return nil, nil
	default:
		return nil, usagef("%s:%d: want a mapping of keys to values, got %s", file, body.GetToken().Position.Line, kindOf(body))
	}
	seen := map[string]int{}
	out := make([]configEntry, 0, len(pairs))
	for _, p := range pairs {
		line := p.Key.GetToken().Position.Line
		key, ok := p.Key.(*ast.StringNode)
		if !ok {
			return nil, usagef("%s:%d: key %s is not a name", file, line, p.Key.String())
		}
		if first, dup := seen[key.Value]; dup {
			return nil, usagef("%s:%d: key %q again (first on line %d)", file, line, key.Value, first)
		}
		seen[key.Value] = line
		out = append(out, configEntry{key: key.Value, line: line, value: p.Value})
	}
	return out, nil
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

// attribute appends to a usage message naming flags that came from the
// environment or the file where each came from, so that a value the
// command refuses after parsing (-loops -1, -log-level loud) is traced to
// its key: "(-loops from rpcd.yaml:3)".
func (src configSources) attribute(msg string) string {
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
