package cputime

import (
	"syscall"
	"time"
)

// Process returns this process's user plus kernel CPU time so far; 0
// if the system does not say.
func Process() time.Duration {
	self, err := syscall.GetCurrentProcess()
	if err != nil {
		return 0
	}
	var created, exited, kernel, user syscall.Filetime
	if err := syscall.GetProcessTimes(self, &created, &exited, &kernel, &user); err != nil {
		return 0
	}
	return ticks(kernel) + ticks(user)
}

// ticks is a Filetime that counts time spent, in 100 ns ticks, as a
// duration (Filetime.Nanoseconds is for dates: it subtracts 1601's epoch).
func ticks(ft syscall.Filetime) time.Duration {
	return time.Duration(int64(ft.HighDateTime)<<32|int64(ft.LowDateTime)) * 100
}
