// Package buildinfo says which rpcd a binary holds: the version of the
// module github.com/rpcd/rpcd it was built with, the revision of the
// source, and the Go release that built it, as `rpcd version` prints them
// and the admin listener's rpcd_build_info metric labels them.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Module is rpcd's module path.
const Module = "github.com/rpcd/rpcd"

// Unknown stands for a revision the binary does not record.
const Unknown = "unknown"

// Info is which rpcd a binary holds.
type Info struct {
	// Version is the module's version: a release (v1.2.0), a
	// pseudo-version (v0.0.0-20260101120000-4f1c2d0e9b7a) as go install
	// MODULE@COMMIT gives, or (devel) for a build from a checkout.
	Version string
	// Revision is the commit the source came from: the VCS revision go
	// build records from a checkout, else the one a pseudo-version names
	// (12 hex digits), else Unknown.
	Revision string
	// GoVersion is the Go release that built the binary (go1.26.0).
	GoVersion string
}

// String is the line rpcd version prints: the labels of rpcd_build_info.
func (i Info) String() string {
	return fmt.Sprintf("rpcd version=%s revision=%s go_version=%s", i.Version, i.Revision, i.GoVersion)
}

// Read returns the Info of the running binary.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return From(bi)
}

// From returns the Info that bi, the build information of a binary,
// records: rpcd's as its main module, or as a dependency of a program
// that embeds it (whose own revision is not rpcd's). A nil bi (a binary
// built without module support) gives (devel), Unknown and the running
// Go release.
func From(bi *debug.BuildInfo) Info {
	info := Info{Version: "(devel)", Revision: Unknown, GoVersion: runtime.Version()}
	if bi == nil {
		return info
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	var mod *debug.Module
	main := bi.Main.Path == Module
	if main {
		mod = &bi.Main
	} else {
		for _, d := range bi.Deps {
			if d.Path == Module {
				mod = d
				break
			}
		}
	}
	if mod == nil {
		return info
	}
	if mod.Replace != nil && mod.Replace.Version != "" {
		mod = mod.Replace
	}
	if mod.Version != "" {
		info.Version = mod.Version
	}
	if main {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				info.Revision = s.Value
				return info
			}
		}
	}
	if rev := pseudoRevision(info.Version); rev != "" {
		info.Revision = rev
	}
	return info
}

// pseudoRevision returns the revision a pseudo-version names (its last
// part, 12 hex digits, after a 14-digit time), or "" if v is none.
func pseudoRevision(v string) string {
	v, _, _ = strings.Cut(v, "+") // +incompatible, +dirty
	i := strings.LastIndexByte(v, '-')
	if i < 0 {
		return ""
	}
	rev, before := v[i+1:], v[:i]
	if len(rev) != 12 || strings.Trim(rev, "0123456789abcdef") != "" {
		return ""
	}
	// The time: "-YYYYMMDDhhmmss" (vX.0.0-) or ".YYYYMMDDhhmmss" (after a pre-release's "0.").
	if len(before) < 15 || (before[len(before)-15] != '-' && before[len(before)-15] != '.') ||
		strings.Trim(before[len(before)-14:], "0123456789") != "" {
		return ""
	}
	return rev
}
