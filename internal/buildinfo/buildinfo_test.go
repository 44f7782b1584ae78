package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// TestFrom: the version, revision and Go release read from each kind of
// build: from a checkout with and without VCS stamping, by go install of a
// release and of a commit, rpcd embedded in another program, replaced,
// and no build information at all.
func TestFrom(t *testing.T) {
	const rev = "4f1c2d0e9b7a6c5d4e3f2a1b0c9d8e7f6a5b4c3d"
	vcs := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want Info
	}{
		{"a checkout, no VCS stamp", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: Module, Version: "(devel)"}},
			Info{"(devel)", Unknown, "go1.26.0"}},
		{"a checkout, stamped", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: Module, Version: "v1.3.1-0.20260102030405-4f1c2d0e9b7a+dirty"}, Settings: vcs},
			Info{"v1.3.1-0.20260102030405-4f1c2d0e9b7a+dirty", rev, "go1.26.0"}},
		{"go install @v1.2.0", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Path: Module, Version: "v1.2.0"}},
			Info{"v1.2.0", Unknown, "go1.26.1"}},
		{"go install @commit", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Path: Module, Version: "v0.0.0-20260102030405-4f1c2d0e9b7a"}},
			Info{"v0.0.0-20260102030405-4f1c2d0e9b7a", "4f1c2d0e9b7a", "go1.26.1"}},
		{"a pre-release's pseudo-version", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Path: Module, Version: "v1.3.0-rc.1.0.20260102030405-4f1c2d0e9b7a"}},
			Info{"v1.3.0-rc.1.0.20260102030405-4f1c2d0e9b7a", "4f1c2d0e9b7a", "go1.26.1"}},
		{"a pre-release", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Path: Module, Version: "v1.3.0-rc.1"}},
			Info{"v1.3.0-rc.1", Unknown, "go1.26.1"}},
		{"embedded: the program's revision is not rpcd's", &debug.BuildInfo{GoVersion: "go1.26.0",
			Main: debug.Module{Path: "example.com/orders", Version: "(devel)"}, Settings: vcs,
			Deps: []*debug.Module{{Path: "github.com/gorilla/websocket", Version: "v1.5.3"}, {Path: Module, Version: "v1.2.0"}}},
			Info{"v1.2.0", Unknown, "go1.26.0"}},
		{"embedded, replaced", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "example.com/orders"},
			Deps: []*debug.Module{{Path: Module, Version: "v1.2.0", Replace: &debug.Module{Path: "example.com/fork/rpcd", Version: "v1.2.1-0.20260102030405-abcdefabcdef"}}}},
			Info{"v1.2.1-0.20260102030405-abcdefabcdef", "abcdefabcdef", "go1.26.0"}},
		{"another program, without rpcd", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "example.com/other"}},
			Info{"(devel)", Unknown, "go1.26.0"}},
		{"no build information", nil, Info{"(devel)", Unknown, runtime.Version()}},
	} {
		if got := From(tc.bi); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestRead: the test binary is rpcd's module, built from a checkout by the
// Go that runs it.
func TestRead(t *testing.T) {
	if got := Read(); got.GoVersion != runtime.Version() || got.Version == "" || got.Revision == "" {
		t.Fatalf("Read() = %+v, want the Go release %s and a version and revision", got, runtime.Version())
	}
}
