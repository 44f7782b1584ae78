package reactor

import "golang.org/x/sys/unix"

// writev writes bs to fd in one writev(2).
func writev(fd int, bs [][]byte) (int, error) { return unix.Writev(fd, bs) }
