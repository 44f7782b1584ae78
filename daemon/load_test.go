package daemon

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// writeConfig writes a configuration file for the test and returns its
// path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rpcd.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// serveFlags returns a flag set as rpcd serve's: the settings and the
// flag FileFlag.
func serveFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("rpcd serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg := DefaultConfig()
	DefineFlags(fs, &cfg, "")
	fs.String(FileFlag, "", "the configuration `file`")
	return fs
}

// serveFlagSet parses args as serve's flags, with extra flags defined
// after serve's own (as a flag added later would be), and applies the
// environment and the configuration file.
func serveFlagSet(t *testing.T, env map[string]string, args []string, extra func(*flag.FlagSet)) (*flag.FlagSet, Sources, error) {
	t.Helper()
	fs := serveFlags()
	if extra != nil {
		extra(fs)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	conf := Load(fs, environ(env))
	return fs, conf.Sources, conf.Err
}

// environ returns env in os.Environ's form.
func environ(env map[string]string) []string {
	var kv []string
	for k, v := range env {
		kv = append(kv, k+"="+v)
	}
	return kv
}

// configErrors reports whether err is ConfigErrors alone, one or joined.
func configErrors(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !configErrors(e) {
				return false
			}
		}
		return true
	}
	var ce *ConfigError
	return errors.As(err, &ce)
}

func flagValue(fs *flag.FlagSet, name string) string { return fs.Lookup(name).Value.String() }

func TestEnvName(t *testing.T) {
	for flagName, want := range map[string]string{
		"max-conns": "RPCD_MAX_CONNS", "addr": "RPCD_ADDR", "tls-client-ca": "RPCD_TLS_CLIENT_CA", "config": "RPCD_CONFIG",
	} {
		if got := EnvName(flagName); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", flagName, got, want)
		}
	}
}

// TestConfigPrecedence checks flag > environment > file > default, for
// flags of each type and for a flag defined after serve's own.
func TestConfigPrecedence(t *testing.T) {
	file := writeConfig(t, `# rpcd serve's configuration
addr: 127.0.0.1:9000
max-conns: 20000
max-frame: 0x100000   # 1 MiB, in hex as flag parsing takes it
drain-timeout: 3s
idle-timeout: 0
log-format: json
log-level: warn
auth-require: "Math/Sum=admin"
gateway: 127.0.0.1:8080
later: from-file
later-bool: true
`)
	extra := func(fs *flag.FlagSet) {
		fs.String("later", "default", "a flag added after this code was written")
		fs.Bool("later-bool", false, "another")
	}

	t.Run("file", func(t *testing.T) {
		fs, src, err := serveFlagSet(t, nil, []string{"-config", file}, extra)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"addr": "127.0.0.1:9000", "max-conns": "20000", "max-frame": "1048576", "drain-timeout": "3s",
			"idle-timeout": "0s", "log-format": "json", "log-level": "warn", "auth-require": "Math/Sum=admin",
			"gateway": "127.0.0.1:8080", "later": "from-file", "later-bool": "true",
			"loops": "0", // not in the file: the default
		}
		for name, v := range want {
			if got := flagValue(fs, name); got != v {
				t.Errorf("-%s = %q, want %q", name, got, v)
			}
		}
		if got := src["max-conns"]; got != file+":3" {
			t.Errorf("source of -max-conns %q, want %s:3", got, file)
		}
	})

	t.Run("environment over file", func(t *testing.T) {
		env := map[string]string{"RPCD_MAX_CONNS": "300", "RPCD_LATER": "from-env", "RPCD_LOG_LEVEL": "", "RPCD_LOOPS": "1"}
		fs, src, err := serveFlagSet(t, env, []string{"-config", file}, extra)
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range map[string]string{"max-conns": "300", "later": "from-env", "loops": "1", "log-level": "warn", "drain-timeout": "3s"} {
			if got := flagValue(fs, name); got != v {
				t.Errorf("-%s = %q, want %q", name, got, v)
			}
		}
		if src["max-conns"] != "$RPCD_MAX_CONNS" {
			t.Errorf("source of -max-conns %q", src["max-conns"])
		}
	})

	t.Run("flag over both", func(t *testing.T) {
		env := map[string]string{"RPCD_MAX_CONNS": "300", "RPCD_LATER": "from-env"}
		fs, src, err := serveFlagSet(t, env, []string{"-config", file, "-max-conns", "5", "-later", "from-flag"}, extra)
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range map[string]string{"max-conns": "5", "later": "from-flag", "log-format": "json"} {
			if got := flagValue(fs, name); got != v {
				t.Errorf("-%s = %q, want %q", name, got, v)
			}
		}
		if _, ok := src["max-conns"]; ok {
			t.Error("a flag given on the command line has a config source")
		}
	})

	t.Run("RPCD_CONFIG", func(t *testing.T) {
		fs, _, err := serveFlagSet(t, map[string]string{"RPCD_CONFIG": file}, nil, extra)
		if err != nil {
			t.Fatal(err)
		}
		if got := flagValue(fs, "max-conns"); got != "20000" {
			t.Errorf("-max-conns = %q from the file $RPCD_CONFIG names, want 20000", got)
		}
		other := writeConfig(t, "max-conns: 7\n")
		fs, _, err = serveFlagSet(t, map[string]string{"RPCD_CONFIG": file}, []string{"-config", other}, extra)
		if err != nil {
			t.Fatal(err)
		}
		if got := flagValue(fs, "max-conns"); got != "7" {
			t.Errorf("-max-conns = %q, want 7 from -config, not $RPCD_CONFIG's file", got)
		}
	})

	t.Run("empty file", func(t *testing.T) {
		for _, text := range []string{"", "# only a comment\n", "---\n"} {
			fs, _, err := serveFlagSet(t, nil, []string{"-config", writeConfig(t, text)}, nil)
			if err != nil {
				t.Errorf("file %q: %v", text, err)
				continue
			}
			if got := flagValue(fs, "addr"); got != DefaultAddr {
				t.Errorf("file %q: -addr %q", text, got)
			}
		}
	})
}

// TestConfigErrors checks each mistake's message: it names the file, the
// line and the key, or the environment variable.
func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		file string
		env  map[string]string
		want string // a regexp; FILE stands for the file's path
	}{
		{name: "unknown key", file: "addr: 127.0.0.1:1\nmax-conn: 5\n",
			want: `^FILE:2: unknown key "max-conn": the keys are the flags of "rpcd serve -h", without the dash$`},
		{name: "string for an integer", file: "max-conns: many\n",
			want: `^FILE:1: max-conns: want an integer, got the string "many"$`},
		{name: "boolean for an integer", file: "\n\nloops: true\n",
			want: `^FILE:3: loops: want an integer, got the boolean true$`},
		{name: "integer for a string", file: "auth-tokens: 12345\n",
			want: `^FILE:1: auth-tokens: want a string \(quote a value that YAML reads as a number or a boolean\), got the integer 12345$`},
		{name: "list", file: "addr:\n  - a\n  - b\n",
			want: `^FILE:1: addr: want a string .*, got a list$`},
		{name: "mapping", file: "max-frame:\n  size: 5\n",
			want: `^FILE:1: max-frame: want an integer, got a mapping$`},
		{name: "no value", file: "addr:\n",
			want: `^FILE:1: addr: want a string .*, got no value$`},
		{name: "duration without a unit", file: "drain-timeout: 10\n",
			want: `^FILE:1: drain-timeout: invalid duration 10: want a string with a unit, such as "10s"$`},
		{name: "duration that does not parse", file: "frame-timeout: ten seconds\n",
			want: `^FILE:1: frame-timeout: invalid duration "ten seconds": want a number and a unit, such as "10s" or "1m30s"$`},
		{name: "integer out of range", file: "max-conns: 99999999999999999999\n",
			want: `^FILE:1: max-conns: `},
		{name: "duplicate key", file: "loops: 1\nloops: 2\n",
			want: `^FILE:2: key "loops" again \(first on line 1\)$`},
		{name: "duplicate key, apart", file: "max-conns: 1\nloops: 1\n\n\"max-conns\": 2\n",
			want: `^FILE:4: key "max-conns" again \(first on line 1\)$`},
		{name: "config in the file", file: "config: other.yaml\n",
			want: `^FILE:1: key "config": a configuration file cannot name another$`},
		{name: "not a mapping", file: "- addr\n",
			want: `^FILE:1: want a mapping of keys to values, got a list$`},
		{name: "YAML syntax", file: "addr: \"127.0.0.1\nloops: 1\n",
			want: `^FILE: line \d+, column \d+: `},
		{name: "bad environment value", env: map[string]string{"RPCD_MAX_CONNS": "many"},
			want: `^\$RPCD_MAX_CONNS: invalid value "many": invalid syntax$`},
		{name: "bad environment duration", env: map[string]string{"RPCD_DRAIN_TIMEOUT": "5"},
			want: `^\$RPCD_DRAIN_TIMEOUT: invalid duration "5": want a number and a unit`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			path := ""
			if tc.file != "" {
				path = writeConfig(t, tc.file)
				args = []string{"-config", path}
			}
			_, _, err := serveFlagSet(t, tc.env, args, nil)
			if err == nil {
				t.Fatal("no error")
			}
			if !configErrors(err) {
				t.Errorf("error %T, want ConfigErrors (rpcd serve: exit status 78)", err)
			}
			want := strings.ReplaceAll(tc.want, "FILE", regexp.QuoteMeta(path))
			if !regexp.MustCompile(want).MatchString(strings.TrimPrefix(err.Error(), "rpcd: ")) {
				t.Errorf("error %q, want it to match %q", err, want)
			}
		})
	}

	t.Run("missing file", func(t *testing.T) {
		_, _, err := serveFlagSet(t, nil, []string{"-config", filepath.Join(t.TempDir(), "none.yaml")}, nil)
		if err == nil || !strings.Contains(err.Error(), "none.yaml") {
			t.Errorf("error %v, want one naming the file", err)
		}
	})
}

// TestConfigUnknownEnv checks the warnings for RPCD_ variables that name
// no flag: a near name is suggested, an empty one is not warned about, nor
// are the flags' own variables and $RPCD_TOKEN.
func TestConfigUnknownEnv(t *testing.T) {
	env := map[string]string{
		"RPCD_MAX_CON": "5", "RPCD_DRAIN": "1s", "RPCD_UNHEARD_OF": "x", "RPCD_EMPTY": "",
		"RPCD_LOOPS": "1", "RPCD_TOKEN": "t", "RPCD_CONFIG": "", "PATH": "/bin", "XRPCD_MAX_CON": "1",
	}
	fs := serveFlags()
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	conf := Load(fs, environ(env))
	if conf.Err != nil {
		t.Fatal(conf.Err)
	}
	want := []string{
		"$RPCD_DRAIN is set, but rpcd has no such variable: it is ignored",
		"$RPCD_MAX_CON is set, but rpcd has no such variable: it is ignored (did you mean $RPCD_MAX_CONNS?)",
		"$RPCD_UNHEARD_OF is set, but rpcd has no such variable: it is ignored",
	}
	if strings.Join(conf.Warnings, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(conf.Warnings, "\n"), strings.Join(want, "\n"))
	}
}

// TestConfigCredentials checks that a file flag takes the credential of
// its name in $CREDENTIALS_DIRECTORY, under the environment and over the
// file, and that credentials naming no file flag are warned about.
func TestConfigCredentials(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"auth-tokens", "tls-key", "max-conns", "tokens"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x\n"), 0o400); err != nil {
			t.Fatal(err)
		}
	}
	file := writeConfig(t, "auth-tokens: /etc/rpcd/tokens\ntls-key: /etc/rpcd/server.key\nauth-hmac-key: /etc/rpcd/hmac\n")
	env := map[string]string{"CREDENTIALS_DIRECTORY": dir, "RPCD_TLS_KEY": "/from/env.key"}
	fs, src, err := serveFlagSet(t, env, []string{"-config", file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"auth-tokens":   filepath.Join(dir, "auth-tokens"),    // the credential over the file
		"tls-key":       "/from/env.key",                      // the environment over the credential
		"auth-hmac-key": "/etc/rpcd/hmac",                     // no credential: the file
		"max-conns":     fmt.Sprint(DefaultConfig().MaxConns), // not a file flag: the credential is ignored
	} {
		if got := flagValue(fs, name); got != want {
			t.Errorf("-%s = %q, want %q", name, got, want)
		}
	}
	if got := src["auth-tokens"]; got != "$CREDENTIALS_DIRECTORY/auth-tokens" {
		t.Errorf("source of -auth-tokens %q", got)
	}
	fs, _, _ = serveFlagSet(t, env, []string{"-auth-tokens", "/from/flag"}, nil)
	if got := flagValue(fs, "auth-tokens"); got != "/from/flag" {
		t.Errorf("-auth-tokens = %q, want the flag's /from/flag over the credential", got)
	}

	fs = serveFlags()
	_ = fs.Parse(nil)
	conf := Load(fs, environ(env))
	want := []string{
		`the credential max-conns (in $CREDENTIALS_DIRECTORY) names no file flag of "rpcd serve": it is ignored`,
		`the credential tokens (in $CREDENTIALS_DIRECTORY) names no file flag of "rpcd serve": it is ignored`,
	}
	if strings.Join(conf.Warnings, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(conf.Warnings, "\n"), strings.Join(want, "\n"))
	}

	_, _, err = serveFlagSet(t, map[string]string{"CREDENTIALS_DIRECTORY": filepath.Join(dir, "none")}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "$CREDENTIALS_DIRECTORY: open ") {
		t.Errorf("a credentials directory that cannot be read: %v", err)
	}
}
