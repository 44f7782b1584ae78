package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rpcd/rpcd/bench/internal/cputime"
)

// The hidden server mode: `bench -serve SYSTEM -addr 127.0.0.1:0` serves
// one system, prints "listening ADDR" on stdout once it listens, and serves
// until its standard input closes or it is signalled.

const listeningPrefix = "listening "

// isServeMode reports whether args (without the program name) ask for the
// hidden server mode.
func isServeMode(args []string) bool {
	return len(args) > 0 && (args[0] == "-serve" || args[0] == "--serve")
}

// serveMain runs the hidden server mode and returns the exit code.
func serveMain(args []string) int {
	fs := flag.NewFlagSet("bench -serve", flag.ContinueOnError)
	name := fs.String("serve", "", "system to serve")
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ownProcess = true
	sys, ok := systems[*name]
	if !ok {
		fmt.Fprintf(os.Stderr, "bench -serve: %v %q\n", errNoSystem, *name)
		return 2
	}
	stop, bound, err := sys.serve(*addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench -serve %s: %v\n", *name, err)
		return 1
	}
	fmt.Printf("%s%s\n", listeningPrefix, bound)

	done := make(chan string, 2)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		done <- "stdin closed"
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() { done <- (<-sig).String() }()
	<-done
	stop()
	return 0
}

// server is a running echo server: in another process (pid > 0) or in this
// one.
type server struct {
	system string
	addr   string
	pid    int // 0 when in this process
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan struct{}
	stopFn func()
}

// startServer starts sys's server: in a child process running this binary
// in server mode, or, if inproc, in this process.
func startServer(sys system, inproc bool) (*server, error) {
	if inproc {
		stop, addr, err := sys.serve("127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("bench: serving %s: %w", sys.name(), err)
		}
		return &server{system: sys.name(), addr: addr, stopFn: stop}, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bench: finding this program to re-run it: %w", err)
	}
	cmd := exec.Command(exe, "-serve", sys.name(), "-addr", "127.0.0.1:0")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: starting the %s server: %w", sys.name(), err)
	}
	s := &server{system: sys.name(), pid: cmd.Process.Pid, cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.exited) }()

	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		found := false
		for sc.Scan() {
			line := sc.Text()
			if !found && strings.HasPrefix(line, listeningPrefix) {
				found = true
				addrc <- strings.TrimPrefix(line, listeningPrefix)
				continue
			}
			fmt.Fprintf(os.Stderr, "%s server: %s\n", sys.name(), line)
		}
		if !found {
			close(addrc)
		}
	}()
	select {
	case addr, ok := <-addrc:
		if !ok {
			s.stop()
			return nil, fmt.Errorf("bench: the %s server exited before listening", sys.name())
		}
		s.addr = addr
		return s, nil
	case <-time.After(30 * time.Second):
		s.stop()
		return nil, fmt.Errorf("bench: the %s server did not listen within 30s", sys.name())
	}
}

// alive reports whether the server is still running.
func (s *server) alive() bool {
	if s.cmd == nil {
		return true
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// cpu returns the server process's CPU time so far; 0 for a server in this
// process, whose CPU is this process's.
func (s *server) cpu() (time.Duration, error) {
	if s.pid == 0 {
		return 0, nil
	}
	return cputime.Process(s.pid)
}

// stop stops the server: closing a child's standard input asks it to shut
// down; it is killed if it has not within 10 s.
func (s *server) stop() {
	if s.cmd == nil {
		if s.stopFn != nil {
			s.stopFn()
		}
		return
	}
	_ = s.stdin.Close()
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

var errServerDied = errors.New("bench: server process exited")
