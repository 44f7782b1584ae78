//go:build !linux && !windows

package main

import "syscall"

// childProcAttr puts the child server in a process group of its own, so a
// Ctrl-C reaches bench, which stops the child.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
