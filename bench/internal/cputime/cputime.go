// Package cputime reads the CPU time of this process and of others, for the
// bench module's commands: user plus system time, all threads.
package cputime

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	rpcdcputime "github.com/rpcd/rpcd/internal/cputime"
)

// Self returns this process's user plus system CPU time so far, as rpcd's
// load tools read it.
func Self() time.Duration { return rpcdcputime.Process() }

var (
	clkTckOnce sync.Once
	clkTck     = 100 // Linux's USER_HZ nearly everywhere
)

// Ticks returns the unit of /proc/PID/stat's times, per second, asked of
// getconf once.
func Ticks() int {
	clkTckOnce.Do(func() {
		out, err := exec.Command("getconf", "CLK_TCK").Output()
		if err != nil {
			return
		}
		if n, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && n > 0 {
			clkTck = n
		}
	})
	return clkTck
}

// Process returns the user plus system CPU time of process pid, all its
// threads, from /proc/PID/stat (utime and stime, in clock ticks).
func Process(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return ParseStat(string(b), Ticks())
}

// ParseStat reads utime and stime (fields 14 and 15) from the text of
// /proc/PID/stat. The command name (field 2) is in parentheses and may hold
// spaces, so fields are counted from the last ')'.
func ParseStat(stat string, ticks int) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: /proc stat without a command name: %.40q", stat)
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("bench: /proc stat with %d fields after the name", len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bench: /proc stat times %q %q", f[11], f[12])
	}
	return time.Duration(utime+stime) * time.Second / time.Duration(ticks), nil
}
