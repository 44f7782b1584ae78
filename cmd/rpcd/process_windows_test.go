package main

import (
	"os"
	"syscall"
)

// processGone reports whether no process pid runs; err says why it cannot
// tell.
func processGone(pid int) (bool, error) {
	h, err := syscall.OpenProcess(syscall.PROCESS_QUERY_INFORMATION, false, uint32(pid))
	if err == syscall.Errno(87) { // ERROR_INVALID_PARAMETER: no such process
		return true, nil
	}
	if err != nil {
		return false, err
	}
	defer syscall.CloseHandle(h)
	var code uint32
	if err := syscall.GetExitCodeProcess(h, &code); err != nil {
		return false, err
	}
	return code != 259, nil // STILL_ACTIVE
}

// killProcess kills the process pid, if it runs.
func killProcess(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
		_ = p.Release()
	}
}
