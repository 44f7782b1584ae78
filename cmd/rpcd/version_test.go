package main

import (
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/rpcd/rpcd/internal/buildinfo"
)

// TestVersion runs `rpcd version`: one line of key=value pairs, the
// module's version and revision as `go version -m` reads them from the
// binary, and the Go release that built it; -version and --version print
// the same; an argument is a usage error.
func TestVersion(t *testing.T) {
	r := rpcd(t, "", "version")
	m := regexp.MustCompile(`^rpcd version=(\S+) revision=(\S+) go_version=(\S+)\n$`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil || r.stderr != "" {
		t.Fatalf("rpcd version: exit %d, stdout %q, stderr %q; want one line rpcd version=V revision=R go_version=G", r.code, r.stdout, r.stderr)
	}
	version, revision, goVersion := m[1], m[2], m[3]
	if goVersion != runtime.Version() { // the test and the binary are built by the same go
		t.Errorf("go_version=%s, want %s", goVersion, runtime.Version())
	}

	// What the go command reads from the binary, independently.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(goTool, "version", "-m", rpcdBin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	wantVersion, wantRevision := "", buildinfo.Unknown
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "mod" && f[1] == buildinfo.Module:
			wantVersion = f[2]
		case len(f) >= 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.revision="):
			wantRevision = strings.TrimPrefix(f[1], "vcs.revision=")
		}
	}
	if version != wantVersion || revision != wantRevision {
		t.Errorf("rpcd version says version=%s revision=%s; go version -m says %s and %s:\n%s", version, revision, wantVersion, wantRevision, out)
	}

	for _, flag := range []string{"-version", "--version"} {
		if r2 := rpcd(t, "", flag); r2.code != 0 || r2.stdout != r.stdout {
			t.Errorf("rpcd %s: exit %d, %q; want %q", flag, r2.code, r2.stdout, r.stdout)
		}
	}
	if r := rpcd(t, "", "version", "extra"); r.code != exitUsage || !strings.Contains(r.stderr, `unexpected argument "extra"`) || !strings.Contains(r.stderr, "usage: rpcd version\n") {
		t.Errorf("rpcd version extra: exit %d, stderr %q; want 78 naming the argument", r.code, r.stderr)
	}
}

// TestVersionLine pins the format of rpcd version's line.
func TestVersionLine(t *testing.T) {
	got := buildinfo.Info{Version: "v1.2.0", Revision: "4f1c2d0e9b7a", GoVersion: "go1.26.0"}.String()
	if want := "rpcd version=v1.2.0 revision=4f1c2d0e9b7a go_version=go1.26.0"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}
