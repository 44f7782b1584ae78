package daemon

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Bounds on a Process's start and stop.
const (
	processStartTimeout = 10 * time.Second // until it logs "rpcd: serving"
	processStopTimeout  = 5 * time.Second  // from SIGTERM to exit, then SIGKILL
	processLogMax       = 64 << 10         // bytes of its log kept
)

// A Process is a daemon in a child process, known by the address it logs
// in its "rpcd: serving" line: the server rpcd bench starts when given no
// address, and those rpcd soak and chaos run.
type Process struct {
	cmd    *exec.Cmd
	args   []string // the arguments it was first started with (Restart)
	log    *processLog
	addr   string        // the address it logged
	exited chan struct{} // closed once it has exited
	err    error         // Wait's result, once exited
}

// StartProcess starts cmd, a daemon writing its log in text to standard
// error (rpcd serve -log-format text), and waits until it logs the address
// it serves at, or until ctx ends (then it stops it). The process is in a
// process group of its own, so that a Ctrl-C on the terminal reaches this
// process only, which then stops it.
func StartProcess(ctx context.Context, cmd *exec.Cmd) (*Process, error) {
	p := &Process{cmd: cmd, args: cmd.Args[1:], log: &processLog{changed: make(chan struct{}, 1)}, exited: make(chan struct{})}
	cmd.Stderr = p.log
	cmd.SysProcAttr = processAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("rpcd: starting a server child process: %w", err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()

	timer := time.NewTimer(processStartTimeout)
	defer timer.Stop()
	for {
		if addr := servingAddr(p.log.bytes()); addr != "" {
			p.addr = addr
			return p, nil
		}
		select {
		case <-p.log.changed:
		case <-p.exited:
			if addr := servingAddr(p.log.bytes()); addr != "" {
				p.addr = addr // and gone already: the run will say so
				return p, nil
			}
			return nil, fmt.Errorf("rpcd: the server child process (pid %d) exited before serving: %v; its log:\n%s", p.Pid(), p.err, p.log.bytes())
		case <-timer.C:
			err := fmt.Errorf("rpcd: the server child process (pid %d) did not log \"rpcd: serving\" within %v; its log:\n%s", p.Pid(), processStartTimeout, p.log.bytes())
			if serr := p.Stop(); serr != nil {
				err = fmt.Errorf("%w\n%v", err, serr)
			}
			return nil, err
		case <-ctx.Done():
			if serr := p.Stop(); serr != nil {
				return nil, serr
			}
			return nil, ctx.Err()
		}
	}
}

// StartServe starts the rpcd program at exe serving, `exe serve
// -log-format text args...`, as StartProcess does.
func StartServe(ctx context.Context, exe string, args ...string) (*Process, error) {
	return StartProcess(ctx, exec.Command(exe, append([]string{"serve", "-log-format", "text"}, args...)...))
}

// Restart starts p's program again once p has exited (Signal, Stop), with
// the same arguments, environment and directory, and -addr the address p
// served at: a daemon started on a port of 0 ("127.0.0.1:0") comes back
// on the port it had. The address may take a moment to be free again
// after a kill: it tries for about a second, until ctx ends.
func (p *Process) Restart(ctx context.Context) (*Process, error) {
	var err error
	for range 20 {
		var q *Process
		// The last -addr given is the one a flag.FlagSet keeps.
		cmd := exec.Command(p.cmd.Path, append(slices.Clip(p.args), "-addr", p.addr)...)
		cmd.Env, cmd.Dir = p.cmd.Env, p.cmd.Dir
		if q, err = StartProcess(ctx, cmd); err == nil {
			q.args = p.args
			return q, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil, err
}

// Addr returns the address the daemon serves at.
func (p *Process) Addr() string { return p.addr }

// Pid returns the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stop sends SIGTERM, on which the daemon drains and exits, and waits for
// the exit; after 5 s it kills the process. It returns an error if the
// process had to be killed or did not exit cleanly. On Windows, where no
// signal but a kill can be sent to another process, it kills it at once.
func (p *Process) Stop() error {
	select {
	case <-p.exited:
		return p.exitError("had exited before the end of the run")
	default:
	}
	if runtime.GOOS == "windows" {
		_ = p.cmd.Process.Kill()
		<-p.exited
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(processStopTimeout)
	defer timer.Stop()
	select {
	case <-p.exited:
		return p.exitError("exited")
	case <-timer.C:
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
	return fmt.Errorf("rpcd: the server child process (pid %d) did not exit within %v of SIGTERM and was killed; its log:\n%s", p.Pid(), processStopTimeout, p.log.bytes())
}

// Signal sends sig and waits for the exit; a process still running 5 s
// after it is killed.
func (p *Process) Signal(sig os.Signal) {
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
		return
	case <-time.After(processStopTimeout):
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// exitError reports an exit other than a clean one.
func (p *Process) exitError(what string) error {
	if p.err == nil {
		return nil
	}
	return fmt.Errorf("rpcd: the server child process (pid %d) %s: %v; its log:\n%s", p.Pid(), what, p.err, p.log.bytes())
}

// servingLine matches Run's "rpcd: serving" line in a text log.
var servingLine = regexp.MustCompile(`(?m)msg="rpcd: serving".* addr=(\S+)`)

// servingAddr returns the address in the "rpcd: serving" line of log, or
// "" if there is none yet.
func servingAddr(log []byte) string {
	if m := servingLine.FindSubmatch(log); m != nil {
		return string(m[1])
	}
	return ""
}

// processLog keeps the start of a process's standard error, up to
// processLogMax bytes, and tells of every write.
type processLog struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // receives after a write, never blocking it
}

func (l *processLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	if room := processLogMax - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (l *processLog) bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}
