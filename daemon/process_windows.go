package daemon

import "syscall"

// processAttr puts the daemon in a process group of its own, so a
// Ctrl-C on the console reaches its parent, which stops it.
func processAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}
