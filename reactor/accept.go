//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package reactor

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pollListener accepts a listener's connections after waiting for them in
// poll(2) on its descriptor, not in Go's network poller; a server uses it
// when its loops take every P (Server.serve).
//
// Why: an event loop waits in epoll_wait (kevent on macOS and the BSDs)
// holding its P, and a loop under load makes its waits too short for
// sysmon to take the P back. With a loop on every P (as `rpcd serve`
// runs), no thread polls Go's network poller but sysmon, every 10 ms, so
// an Accept parked there took about a connection per 10 ms while the loops
// were busy: 982 and 1,210 connections (each dialled, called once and
// closed) in 3 s, at p90 10.0 and 8.1 ms, against 8,492 and 6,568 at 0.67
// and 0.80 ms this way (docs/performance.md, "Event loops and Ps"; Linux).
// A goroutine whose system call returns needs no poller: it queues for the
// next free P, which a loop gives up at its next pause. poll(2) is in
// POSIX, so the same code serves the kqueue loops; on Windows there are no
// loops and Go's poller accepts (socket_windows.go).
//
// Why not always: a wait in poll(2) that outlasts sysmon's 20 µs tick is a
// system call whose P sysmon takes back, and each such take has sysmon tick
// at 20 µs again. With a P to spare, which polls Go's poller, an Accept
// waiting there costs nothing: `rpcd serve -gateway` (a loop fewer than
// Ps) made 994 nanosleeps in 5 s idle with poll(2), 172 without.
type pollListener struct {
	net.Listener
	rc     syscall.RawConn
	ddl    interface{ SetDeadline(time.Time) error }
	wakeR  *os.File // readable once Close has begun: ends a wait
	wakeW  *os.File
	wake   int32 // wakeR's descriptor
	closed atomic.Bool
	once   sync.Once
}

// acceptWaitMax bounds an Accept that poll(2) sent after a connection gone
// by the time it ran (reset by its peer): the Accept gives up then, and the
// wait starts again, instead of parking in Go's network poller.
const acceptWaitMax = time.Millisecond

// newPollListener wraps ln, or returns ln itself if it has no descriptor
// to poll (a listener type of the caller's own, given to Server.Serve) or
// the pipe that ends a wait cannot be made.
func newPollListener(ln net.Listener) net.Listener {
	sc, ok := ln.(syscall.Conn)
	ddl, ok2 := ln.(interface{ SetDeadline(time.Time) error })
	if !ok || !ok2 {
		return ln
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return ln
	}
	r, w, err := os.Pipe()
	if err != nil {
		return ln
	}
	return &pollListener{Listener: ln, rc: rc, ddl: ddl, wakeR: r, wakeW: w, wake: int32(r.Fd())}
}

// Accept waits for a connection in poll(2), then takes it.
func (l *pollListener) Accept() (net.Conn, error) {
	for {
		if l.closed.Load() {
			return nil, net.ErrClosed
		}
		ready, err := l.wait()
		if err != nil {
			return nil, l.failed(err)
		}
		if !ready || l.closed.Load() {
			continue
		}
		_ = l.ddl.SetDeadline(time.Now().Add(acceptWaitMax))
		nc, err := l.Listener.Accept()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			continue
		}
		return nc, l.failed(err)
	}
}

// failed closes the pipe once the listener was closed behind the
// wrapper's back, and returns err.
func (l *pollListener) failed(err error) error {
	if errors.Is(err, net.ErrClosed) {
		l.Close()
	}
	return err
}

// acceptPollMax bounds one wait in poll(2). The descriptor is held open
// while poll(2) looks at it, so a Close of the listener itself, not
// through this wrapper (Server.Serve's caller closing its own listener),
// waits for the poll to end: at most this long. (A variable for the tests.)
var acceptPollMax = 200 * time.Millisecond

// wait waits in poll(2) until the listener has a connection waiting, Close
// has begun or acceptPollMax has passed, and reports whether the listener
// is readable. The descriptor is held open meanwhile (RawConn.Control),
// so that no Close can free its number for another file while poll(2)
// looks at it; Close ends the wait first. The pipe's read end is open
// too while Control runs: Close closes it only after the listener, whose
// Close waits for Control to return.
func (l *pollListener) wait() (bool, error) {
	var n int
	var perr error
	err := l.rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: l.wake, Events: unix.POLLIN}}
		for {
			n, perr = unix.Poll(fds, int(acceptPollMax/time.Millisecond))
			if perr != unix.EINTR {
				return
			}
		}
	})
	if err != nil {
		return false, err
	}
	return n > 0, perr
}

// Close ends any wait at once, then closes the listener and the pipe.
func (l *pollListener) Close() error {
	var err error
	l.once.Do(func() {
		l.closed.Store(true)
		l.wakeW.Close() // the read end polls readable (end of file) from here on
		err = l.Listener.Close()
		l.wakeR.Close()
	})
	return err
}
