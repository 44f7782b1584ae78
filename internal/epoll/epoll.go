//go:build linux

package epoll

import (
	"os"
	"syscall"
	"time"
	"unsafe"
)

// Instance is an epoll instance in the runtime's poller. One goroutine
// at a time waits on it; any may add, change and remove sockets (Ctl).
type Instance struct {
	Fd int // for Ctl

	f    *os.File        // Fd, in the runtime's poller
	rc   syscall.RawConn // f's
	wait func(fd uintptr) bool
	evs  []syscall.EpollEvent
	n    int // events in evs from the last wait
}

// New returns an epoll instance, close-on-exec, in the runtime's poller,
// whose Wait returns at most max events; name names its os.File.
func New(max int, name string) (*Instance, error) {
	fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	in := &Instance{Fd: fd, f: os.NewFile(uintptr(fd), name), evs: make([]syscall.EpollEvent, max)}
	// A deadline is refused unless the runtime's poller took the instance.
	if err := in.f.SetReadDeadline(time.Time{}); err != nil {
		in.f.Close()
		return nil, err
	}
	if in.rc, err = in.f.SyscallConn(); err != nil {
		in.f.Close()
		return nil, err
	}
	in.wait = func(fd uintptr) bool {
		for {
			n, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, fd, uintptr(unsafe.Pointer(&in.evs[0])), uintptr(len(in.evs)), 0, 0, 0)
			switch e {
			case 0:
				in.n = int(n)
				return n > 0 // none ready: park until the instance is readable
			case syscall.EINTR:
			default:
				panic("rpcd: epoll_wait: " + e.Error()) // only a bad descriptor fails it
			}
		}
	}
	return in, nil
}

// Wait returns the events ready, waiting for one in the runtime's poller;
// os.ErrDeadlineExceeded, with none, once the deadline passes. The events
// are valid until the next Wait.
func (in *Instance) Wait() ([]syscall.EpollEvent, error) {
	in.n = 0
	if err := in.rc.Read(in.wait); err != nil {
		return nil, err
	}
	return in.evs[:in.n], nil
}

// SetDeadline sets when a Wait returns with none (the zero Time: never),
// and wakes a Wait under way to see it.
func (in *Instance) SetDeadline(t time.Time) error { return in.f.SetReadDeadline(t) }

// Ctl adds (EPOLL_CTL_ADD), changes (EPOLL_CTL_MOD) or removes
// (EPOLL_CTL_DEL) the socket fd, its events reported with data in the
// event's Fd field.
func (in *Instance) Ctl(op, fd int, events uint32, data int32) error {
	ev := syscall.EpollEvent{Events: events, Fd: data}
	return syscall.EpollCtl(in.Fd, op, fd, &ev)
}

// Close closes the instance.
func (in *Instance) Close() error { return in.f.Close() }

// Dup returns a new descriptor of rc's socket, close-on-exec and
// non-blocking (the flag is the socket's, shared with rc's), which stays
// the socket's once rc's connection is closed.
func Dup(rc syscall.RawConn) (int, error) {
	fd, errno := -1, syscall.Errno(0)
	err := rc.Control(func(s uintptr) {
		n, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, s, syscall.F_DUPFD_CLOEXEC, 0)
		fd, errno = int(n), e
	})
	switch {
	case err != nil:
		return -1, err
	case errno != 0:
		return -1, os.NewSyscallError("fcntl", errno)
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

// The events WaitFd waits for.
const (
	PollIn  = 0x1
	PollOut = 0x4
)

// WaitFd waits in ppoll, a blocking system call, until fd has one of
// events (PollIn, PollOut), or an error or its end, which the next read
// or write sees; os.ErrDeadlineExceeded once deadline passes (the zero
// Time: never).
func WaitFd(fd int, events int16, deadline time.Time) error {
	pfd := struct {
		fd             int32
		events, revent int16
	}{int32(fd), events, 0}
	for {
		var ts *syscall.Timespec
		if !deadline.IsZero() {
			d := time.Until(deadline)
			if d <= 0 {
				return os.ErrDeadlineExceeded
			}
			t := syscall.NsecToTimespec(int64(d))
			ts = &t
		}
		n, _, e := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(ts)), 0, 0, 0)
		switch {
		case e == syscall.EINTR:
		case e != 0:
			return os.NewSyscallError("ppoll", e)
		case n > 0:
			return nil
		}
	}
}

// Write writes b to fd, a non-blocking socket, waiting in WaitFd for room
// when it has none, until deadline (the zero Time: never); it returns how
// many bytes it wrote.
func Write(fd int, b []byte, deadline time.Time) (int, error) {
	n := 0
	for {
		m, err := WriteNow(fd, b[n:])
		n += m
		if err != nil || n == len(b) {
			return n, err
		}
		if err := WaitFd(fd, PollOut, deadline); err != nil {
			return n, err
		}
	}
}

// WriteNow writes b to fd, a non-blocking socket, as far as it takes it
// without waiting, and returns how many bytes it took.
func WriteNow(fd int, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[n])), uintptr(len(b)-n))
		switch e {
		case 0:
			n += int(m)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return n, nil
		default:
			return n, os.NewSyscallError("write", e)
		}
	}
	return n, nil
}
