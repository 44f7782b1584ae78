package daemon

import "syscall"

// processAttr puts the daemon in a process group of its own (a Ctrl-C
// reaches its parent, which stops it) and has the kernel send it SIGTERM
// should its parent die without stopping it (a SIGKILL). The kernel ties
// that signal to the thread that started the child; Go keeps its threads
// for the life of the process, so in practice it is the parent's death.
func processAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
