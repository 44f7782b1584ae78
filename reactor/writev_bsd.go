//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package reactor

import gio "github.com/panjf2000/gnet/v2/pkg/io"

// writev writes bs to fd in one writev(2), as gnet's kqueue loops write:
// golang.org/x/sys/unix has no Writev on FreeBSD and the other BSDs.
func writev(fd int, bs [][]byte) (int, error) { return gio.Writev(fd, bs) }
