package main

import "syscall"

// childProcAttr puts the child server in a process group of its own, so a
// Ctrl-C on the console reaches bench, which stops the child.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}
