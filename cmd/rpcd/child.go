package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// Bounds on the child server's start and stop.
const (
	childStartTimeout = 10 * time.Second // until it logs "rpcd: serving"
	childStopTimeout  = 5 * time.Second  // from SIGTERM to exit, then SIGKILL
	childLogMax       = 64 << 10         // bytes of its log kept
)

// serveChild is an `rpcd serve` child process: the server bench starts
// when no -addr is given, and the servers soak and chaos run.
type serveChild struct {
	cmd    *exec.Cmd
	log    *childLog
	addr   string        // the address it logged
	exited chan struct{} // closed once it has exited
	err    error         // Wait's result, once exited
}

// startServeChild starts this program as `rpcd serve -log-format text
// args...` and waits until it logs the address it listens on. The child is
// in a process group of its own, so that a Ctrl-C on the terminal reaches
// this process only, which then stops the child itself.
func startServeChild(ctx context.Context, args ...string) (*serveChild, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("rpcd: finding this program to start a server: %w", err)
	}
	ch := &serveChild{log: newChildLog(), exited: make(chan struct{})}
	ch.cmd = exec.Command(exe, append([]string{"serve", "-log-format", "text"}, args...)...)
	ch.cmd.Stderr = ch.log
	ch.cmd.SysProcAttr = childProcAttr()
	if err := ch.cmd.Start(); err != nil {
		return nil, fmt.Errorf("rpcd: starting a server child process: %w", err)
	}
	go func() {
		ch.err = ch.cmd.Wait()
		close(ch.exited)
	}()

	timer := time.NewTimer(childStartTimeout)
	defer timer.Stop()
	for {
		if addr := childServingAddr(ch.log.bytes()); addr != "" {
			ch.addr = addr
			return ch, nil
		}
		select {
		case <-ch.log.changed:
		case <-ch.exited:
			if addr := childServingAddr(ch.log.bytes()); addr != "" {
				ch.addr = addr // and gone already: the run will say so
				return ch, nil
			}
			return nil, fmt.Errorf("rpcd: the server child process (pid %d) exited before serving: %v; its log:\n%s", ch.pid(), ch.err, ch.log.bytes())
		case <-timer.C:
			err := fmt.Errorf("rpcd: the server child process (pid %d) did not log \"rpcd: serving\" within %v; its log:\n%s", ch.pid(), childStartTimeout, ch.log.bytes())
			if serr := ch.stop(); serr != nil {
				err = fmt.Errorf("%w\n%v", err, serr)
			}
			return nil, err
		case <-ctx.Done():
			if serr := ch.stop(); serr != nil {
				return nil, serr
			}
			return nil, ctx.Err()
		}
	}
}

func (ch *serveChild) pid() int { return ch.cmd.Process.Pid }

// stop sends SIGTERM, on which serve drains and exits, and waits for the
// exit; after childStopTimeout it kills the child. It returns an error if
// the child had to be killed or did not exit cleanly. On Windows, where no
// signal but a kill can be sent to another process, it kills the child at
// once: the run is over, and nothing is lost but the drain.
func (ch *serveChild) stop() error {
	select {
	case <-ch.exited:
		return ch.exitError("had exited before the end of the run")
	default:
	}
	if runtime.GOOS == "windows" {
		_ = ch.cmd.Process.Kill()
		<-ch.exited
		return nil
	}
	_ = ch.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(childStopTimeout)
	defer timer.Stop()
	select {
	case <-ch.exited:
		return ch.exitError("exited")
	case <-timer.C:
	}
	_ = ch.cmd.Process.Kill()
	<-ch.exited
	return fmt.Errorf("rpcd: the server child process (pid %d) did not exit within %v of SIGTERM and was killed; its log:\n%s", ch.pid(), childStopTimeout, ch.log.bytes())
}

// signal sends sig and waits for the exit; a child still running
// childStopTimeout after it is killed.
func (ch *serveChild) signal(sig os.Signal) {
	_ = ch.cmd.Process.Signal(sig)
	select {
	case <-ch.exited:
		return
	case <-time.After(childStopTimeout):
	}
	_ = ch.cmd.Process.Kill()
	<-ch.exited
}

// exitError reports an exit other than a clean one.
func (ch *serveChild) exitError(what string) error {
	if ch.err == nil {
		return nil
	}
	return fmt.Errorf("rpcd: the server child process (pid %d) %s: %v; its log:\n%s", ch.pid(), what, ch.err, ch.log.bytes())
}

// childServing matches serve's "rpcd: serving" line in its text log.
var childServing = regexp.MustCompile(`(?m)msg="rpcd: serving".* addr=(\S+)`)

// childServingAddr returns the address in the "rpcd: serving" line of log,
// or "" if there is none yet.
func childServingAddr(log []byte) string {
	if m := childServing.FindSubmatch(log); m != nil {
		return string(m[1])
	}
	return ""
}

// childLog keeps the start of the child's standard error, up to
// childLogMax bytes, and tells of every write.
type childLog struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // receives after a write, never blocking it
}

func newChildLog() *childLog { return &childLog{changed: make(chan struct{}, 1)} }

func (l *childLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	if room := childLogMax - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (l *childLog) bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}
