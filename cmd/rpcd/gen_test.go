package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeGen runs gen against `rpcd serve` with its own routes alone:
// each language writes gen's golden file for them, byte for byte, from the
// server or from what describe -json saved; -o writes a file; mistakes are
// usage errors (exit 78) and a server that is not there fails (exit 1).
func TestServeGen(t *testing.T) {
	s := serveInProcessWith(t, nil, "-loops", "1")
	saved, errOut, code := callInProcess("describe", "-addr", s.addr, "-json")
	if code != 0 {
		t.Fatalf("describe -json: exit status %d: %s", code, errOut)
	}
	dir := t.TempDir()
	savedFile := filepath.Join(dir, "routes.json")
	if err := os.WriteFile(savedFile, []byte(saved), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct {
		lang, golden string
		args         []string
	}{
		{"ts", "../../clients/ts/test/gen/api.ts", nil},
		{"python", "../../clients/python/tests/builtin_api.py", nil},
		{"go", "../../gen/internal/builtinapi/api.go", []string{"-package", "builtinapi"}},
	} {
		want, err := os.ReadFile(l.golden)
		if err != nil {
			t.Fatal(err)
		}
		out, errOut, code := callInProcess(append([]string{"gen", l.lang, "-addr", s.addr}, l.args...)...)
		if code != 0 || out != string(want) {
			t.Errorf("gen %s -addr: exit status %d, stderr %q; stdout is not %s (%d bytes, want %d)", l.lang, code, errOut, l.golden, len(out), len(want))
		}
		file := filepath.Join(dir, l.lang+".out")
		out, errOut, code = callInProcess(append([]string{"gen", l.lang, "-in", savedFile, "-o", file}, l.args...)...)
		got, _ := os.ReadFile(file)
		if code != 0 || out != "" || string(got) != string(want) {
			t.Errorf("gen %s -in -o: exit status %d, stderr %q, stdout %q; the file is not %s", l.lang, code, errOut, out, l.golden)
		}
	}

	for _, args := range [][]string{{}, {"rust"}, {"ts", "extra"}, {"ts", "-in"}} {
		if _, errOut, code := callInProcess(append([]string{"gen"}, args...)...); code != exitUsage || !strings.Contains(errOut, "usage: rpcd gen") {
			t.Errorf("gen %q: exit status %d, stderr %q; want %d and the usage", args, code, errOut, exitUsage)
		}
	}
	if _, errOut, code := callInProcess("gen", "go", "-in", savedFile, "-package", "no-go"); code != exitFail || !strings.Contains(errOut, "not a Go identifier") {
		t.Errorf("gen go -package no-go: exit status %d, stderr %q", code, errOut)
	}
	if _, errOut, code := callInProcess("gen", "-in", savedFile, "python"); code != 0 {
		t.Errorf("gen with its flags before the language: exit status %d, stderr %q", code, errOut)
	}
	if _, errOut, code := callInProcess("gen", "ts", "-in", filepath.Join(dir, "none.json")); code != exitFail || !strings.HasPrefix(errOut, "rpcd: -in: ") {
		t.Errorf("gen -in a missing file: exit status %d, stderr %q", code, errOut)
	}
	if _, errOut, code := callInProcess("gen", "ts", "-in", filepath.Join(dir, "ts.out")); code != exitFail || !strings.Contains(errOut, "do not decode") {
		t.Errorf("gen -in a file that is not descriptions: exit status %d, stderr %q", code, errOut)
	}
}
