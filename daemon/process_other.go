//go:build !linux && !windows

package daemon

import "syscall"

// processAttr puts the daemon in a process group of its own, so a Ctrl-C
// reaches its parent, which stops it.
func processAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
