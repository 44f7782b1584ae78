package main

import "syscall"

// childProcAttr puts the child server in a process group of its own (a
// Ctrl-C reaches bench, which stops the child) and has the kernel send it
// SIGTERM should bench die without stopping it (a SIGKILL). The kernel ties
// that signal to the thread that started the child; Go keeps its threads
// for the life of the process, so in practice it is bench's death.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
