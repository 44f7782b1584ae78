//go:build unix

package main

import (
	"errors"
	"syscall"
)

// processGone reports whether no process pid runs; err says why it cannot
// tell.
func processGone(pid int) (bool, error) {
	err := syscall.Kill(pid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return true, nil
	}
	return false, err
}

// killProcess kills the process pid, if it runs.
func killProcess(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }
