package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sys/unix"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/discovery/etcd"
	"github.com/rpcd/rpcd/internal/etcdtest"
	"github.com/rpcd/rpcd/load"
)

// upgrades is how many upgrades TestProcessUpgradeUnderLoad runs in a row.
var upgrades = flag.Int("upgrades", 20, "TestProcessUpgradeUnderLoad: upgrades in a row")

// Bounds on the waits of the upgrade tests.
const (
	upgradeWait = 20 * time.Second // a new pid in the pid file, an old process's exit
	callTimeout = 10 * time.Second // each call of the load, retries and waits included
)

// upgradable is an `rpcd serve` process and those that upgrades put in its
// place, all writing one log file. The test process is their subreaper, so
// that each, its parent gone, is reaped here with its exit status.
type upgradable struct {
	t                    *testing.T
	dir, exe             string
	logPath, pidPath     string
	ledger               string
	addr, gateway, admin string
	pid                  int          // the process serving now
	pids                 []int        // every process started, the first first
	notes                chan string  // $NOTIFY_SOCKET's messages, in order
	stopNotes            func()       // stops reading them
	reaped               map[int]bool // processes waited for
}

// startUpgradable starts `exe serve` on port 0 for the RPC port, the
// gateway and the admin listener, with a pid file, a chaos ledger and
// $NOTIFY_SOCKET, and waits until it serves.
func startUpgradable(t *testing.T, exe string, args ...string) *upgradable {
	t.Helper()
	needSignals(t)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatalf("becoming a subreaper: %v", err)
	}
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
	dir := t.TempDir()
	sockDir, err := os.MkdirTemp("", "rpcd-up-") // short: a socket's path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	s := &upgradable{t: t, dir: dir, exe: exe, logPath: filepath.Join(dir, "log"), pidPath: filepath.Join(dir, "pid"),
		ledger: filepath.Join(dir, "ledger"), notes: make(chan string, 1024), reaped: map[int]bool{}}
	notify := filepath.Join(sockDir, "notify")
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notify, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	go func() { // read without pause: a full queue would stall a sender
		defer close(s.notes)
		buf := make([]byte, 4096)
		for {
			n, err := sock.Read(buf)
			if err != nil {
				return
			}
			select {
			case s.notes <- string(buf[:n]):
			default:
				t.Errorf("more than %d notifications", cap(s.notes))
			}
		}
	}()
	s.stopNotes = sync.OnceFunc(func() { sock.Close() })
	t.Cleanup(s.stopNotes)

	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(exe, append([]string{"serve", "-addr", "127.0.0.1:0", "-gateway", "127.0.0.1:0", "-admin", "127.0.0.1:0",
		"-pid-file", s.pidPath, "-chaos-ledger", s.ledger, "-log-format", "text", "-loops", "1",
		"-max-inflight", "4096"}, args...)...) // no call refused as overload when the tests share the cores
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+notify)
	cmd.Stderr = logf // a file, not a pipe: each new process writes it too, and none outlives a pipe's reader
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting rpcd serve: %v", err)
	}
	s.pid = cmd.Process.Pid
	s.pids = []int{s.pid}
	t.Cleanup(s.kill)
	if got := s.waitPIDFile(0); got != s.pid {
		t.Fatalf("the pid file says %d, want %d", got, s.pid)
	}
	s.waitLog(`msg="rpcd: serving"`, 1) // logged just after the pid file is written
	log := s.log()
	s.addr = servingAddr(log)
	s.gateway = logField(t, log, "rpcd: gateway serving", "gateway")
	s.admin = logField(t, log, "rpcd: admin serving", "admin")
	return s
}

// kill kills every process of s still running and reaps them.
func (s *upgradable) kill() {
	for _, pid := range s.pids {
		if !s.reaped[pid] {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			s.waitExit(pid)
		}
	}
}

// log returns what the processes have logged so far.
func (s *upgradable) log() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		s.t.Fatal(err)
	}
	return string(b)
}

// waitLog waits until the log has n lines with text.
func (s *upgradable) waitLog(text string, n int) {
	s.t.Helper()
	deadline := time.Now().Add(upgradeWait)
	for strings.Count(s.log(), text) < n {
		if time.Now().After(deadline) {
			s.t.Fatalf("the log has not %d lines with %q after %v:\n%s", n, text, upgradeWait, s.log())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitPIDFile waits until the pid file names a process other than old,
// and returns it.
func (s *upgradable) waitPIDFile(old int) int {
	s.t.Helper()
	deadline := time.Now().Add(upgradeWait)
	for {
		b, _ := os.ReadFile(s.pidPath)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid != old {
			return pid
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the pid file does not name a process other than %d after %v; log:\n%s", old, upgradeWait, s.log())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitExit reaps the process pid, the test's child or orphan, and returns
// its wait status; it fails the test if pid still runs after upgradeWait.
func (s *upgradable) waitExit(pid int) syscall.WaitStatus {
	s.t.Helper()
	deadline := time.Now().Add(upgradeWait)
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		switch {
		case got == pid:
			s.reaped[pid] = true
			return ws
		case err != nil && !errors.Is(err, syscall.EINTR):
			s.t.Fatalf("waiting for pid %d: %v", pid, err)
		case time.Now().After(deadline):
			s.t.Fatalf("pid %d still runs after %v; log:\n%s", pid, upgradeWait, s.log())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// upgrade sends SIGUSR2 to the process serving, waits until its successor
// serves and it has exited 0, and returns how long each took.
func (s *upgradable) upgrade() (serving, exited time.Duration) {
	s.t.Helper()
	old := s.pid
	begin := time.Now()
	if err := syscall.Kill(old, syscall.SIGUSR2); err != nil {
		s.t.Fatal(err)
	}
	s.adopt(s.waitPIDFile(old))
	serving = time.Since(begin)
	if ws := s.waitExit(old); !ws.Exited() || ws.ExitStatus() != 0 {
		s.t.Errorf("the old process (pid %d) ended with %v, want exit status 0", old, ws)
	}
	return serving, time.Since(begin)
}

// adopt makes pid the process serving.
func (s *upgradable) adopt(pid int) {
	if slices.Contains(s.pids, pid) {
		s.t.Fatalf("pid %d serves again: an upgrade gave no new process", pid)
	}
	s.pid = pid
	s.pids = append(s.pids, pid)
}

// stop sends SIGTERM to the process serving and checks it exits 0.
func (s *upgradable) stop() {
	s.t.Helper()
	if err := syscall.Kill(s.pid, syscall.SIGTERM); err != nil {
		s.t.Fatal(err)
	}
	if ws := s.waitExit(s.pid); !ws.Exited() || ws.ExitStatus() != 0 {
		s.t.Errorf("the last process (pid %d) ended with %v after SIGTERM, want exit status 0", s.pid, ws)
	}
	s.stopNotes()
}

// logField returns the value of key in the first log line with msg.
func logField(t *testing.T, log, msg, key string) string {
	t.Helper()
	m := regexp.MustCompile(`msg="` + regexp.QuoteMeta(msg) + `".* ` + key + `=(\S+)`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no %q line with %s= in the log:\n%s", msg, key, log)
	}
	return m[1]
}

// upgradeLoad is the load of the upgrade tests: open-loop calls over
// several connections, a client dialling, calling once and closing
// without pause, and HTTP requests to the gateway, each call with a key
// of its own, so that the ledger tells what ran.
type upgradeLoad struct {
	stop    chan struct{}
	wg      sync.WaitGroup
	pending sync.WaitGroup // the open-loop calls out

	calls, failed       atomic.Int64 // RPC calls, and those that failed
	dials, dialFailed   atomic.Int64 // connections dialled, and refused or reset
	churned             atomic.Int64 // connections opened, called once and closed
	requests, httpFails atomic.Int64 // HTTP requests to the gateway, and those not 200 "ok"

	mu      sync.Mutex
	replied map[string]bool // keys of the calls and requests answered
	errs    []string        // the first errors
}

// startUpgradeLoad starts the load on s: every millisecond on average an
// open-loop call through a client of 4 connections, one connection dialled,
// called once and closed after another, and HTTP requests to the gateway
// one after another on 2 keep-alive connections.
func startUpgradeLoad(t *testing.T, s *upgradable) *upgradeLoad {
	t.Helper()
	l := &upgradeLoad{stop: make(chan struct{}), replied: map[string]bool{}}
	opts := client.Options{
		WaitForReady: true,
		MinBackoff:   10 * time.Millisecond,
		MaxBackoff:   200 * time.Millisecond,
		Timeout:      callTimeout,
		Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			l.dials.Add(1)
			nc, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				l.dialFailed.Add(1)
				l.fail("dial: %v", err)
			}
			return nc, err
		},
	}
	many := opts
	many.Conns = 4
	cl, err := client.Dial(context.Background(), s.addr, many)
	if err != nil {
		t.Fatal(err)
	}

	l.wg.Add(1)
	go func() { // open loop: the calls due by the clock, however the others fare
		defer l.wg.Done()
		defer cl.Close()
		defer l.pending.Wait()
		const every = time.Millisecond
		begin := time.Now()
		tick := time.NewTicker(2 * every)
		defer tick.Stop()
		for sent := 0; ; {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			for due := int(time.Since(begin) / every); sent < due; sent++ {
				key := "0-" + strconv.Itoa(sent)
				l.calls.Add(1)
				l.pending.Add(1)
				cl.CallRawAsync(context.Background(), load.ChaosRecord, []byte(key), nil, func(reply []byte, err error) {
					l.answered(key, reply, err)
					l.pending.Done()
				})
			}
		}
	}()

	l.wg.Add(1)
	go func() { // a connection at a time: dial, one call, close
		defer l.wg.Done()
		one := opts
		one.Conns = 1
		for seq := 0; ; seq++ {
			select {
			case <-l.stop:
				return
			default:
			}
			key := "1-" + strconv.Itoa(seq)
			l.calls.Add(1)
			c, err := client.Dial(context.Background(), s.addr, one)
			if err != nil {
				l.answered(key, nil, err)
				continue
			}
			l.churned.Add(1)
			reply, err := c.CallRaw(context.Background(), load.ChaosRecord, []byte(key), nil)
			c.Close()
			l.answered(key, reply, err)
		}
	}()

	hc := &http.Client{Timeout: callTimeout, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2}}
	for g := range 2 {
		l.wg.Add(1)
		go func() { // the gateway: one request after another
			defer l.wg.Done()
			defer hc.CloseIdleConnections()
			for seq := 0; ; seq++ {
				select {
				case <-l.stop:
					return
				default:
				}
				key := fmt.Sprintf("%d-%d", 2+g, seq)
				l.requests.Add(1)
				resp, err := hc.Post("http://"+s.gateway+"/rpc/"+load.ChaosRecord, "application/octet-stream", strings.NewReader(key))
				if err != nil {
					l.httpFails.Add(1)
					l.fail("gateway %s: %v", key, err)
					continue
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || string(body) != "ok" {
					l.httpFails.Add(1)
					l.fail("gateway %s: %s %q %v", key, resp.Status, body, err)
					continue
				}
				l.mu.Lock()
				l.replied[key] = true
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// answered counts a call's outcome.
func (l *upgradeLoad) answered(key string, reply []byte, err error) {
	if err == nil && string(reply) != "ok" {
		err = fmt.Errorf("reply %q", reply)
	}
	if err != nil {
		l.failed.Add(1)
		l.fail("call %s: %v", key, err)
		return
	}
	l.mu.Lock()
	l.replied[key] = true
	l.mu.Unlock()
}

// fail notes an error, the first 10 in full.
func (l *upgradeLoad) fail(format string, args ...any) {
	l.mu.Lock()
	if len(l.errs) < 10 {
		l.errs = append(l.errs, fmt.Sprintf(format, args...))
	}
	l.mu.Unlock()
}

// end stops the load and waits for every call out to end.
func (l *upgradeLoad) end() {
	close(l.stop)
	l.wg.Wait()
}

// judge checks the load against the ledger once the server has stopped:
// nothing failed, each call answered ran once, none ran twice, and the
// ledger has no call that was not answered. It returns the calls that ran
// twice.
func (l *upgradeLoad) judge(t *testing.T, ledger string) (ranTwice int) {
	t.Helper()
	b, err := os.ReadFile(ledger)
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]int{}
	for _, key := range strings.Fields(string(b)) {
		ran[key]++
	}
	for key, n := range ran {
		if n > 1 {
			ranTwice++
			t.Errorf("%s ran %d times", key, n)
		}
		if !l.replied[key] {
			t.Errorf("%s ran, but its caller saw no answer", key)
		}
	}
	for key := range l.replied {
		if ran[key] == 0 {
			t.Errorf("%s was answered but never ran", key)
		}
	}
	if l.dialFailed.Load() != 0 || l.failed.Load() != 0 || l.httpFails.Load() != 0 {
		t.Errorf("%d connections refused or reset, %d calls failed, %d gateway errors; the first: %q",
			l.dialFailed.Load(), l.failed.Load(), l.httpFails.Load(), l.errs)
	}
	if l.calls.Load() == 0 || l.requests.Load() == 0 || l.churned.Load() == 0 {
		t.Errorf("no load: %d calls, %d connections churned, %d requests", l.calls.Load(), l.churned.Load(), l.requests.Load())
	}
	return ranTwice
}

// TestProcessUpgradeUnderLoad upgrades `rpcd serve`, with its gateway and
// admin listener, -upgrades times in a row (SIGUSR2) under the load of
// startUpgradeLoad: no connection is refused or reset, no call or gateway
// request fails, none runs twice, each upgrade gives a new pid, each old
// process exits 0, and systemd hears MAINPID and READY=1 of each new
// process and STOPPING=1 only at the end.
func TestProcessUpgradeUnderLoad(t *testing.T) {
	s := startUpgradable(t, rpcdBin, "-drain-timeout", "5s")
	l := startUpgradeLoad(t, s)
	time.Sleep(200 * time.Millisecond) // the load under way
	var toServe, toExit []time.Duration
	for range *upgrades {
		serving, exited := s.upgrade()
		toServe, toExit = append(toServe, serving), append(toExit, exited)
		if t.Failed() {
			break
		}
		time.Sleep(50 * time.Millisecond) // calls on the new process before the next
	}
	l.end()
	s.stop()
	twice := l.judge(t, s.ledger)
	if got := strings.Count(s.log(), `msg="rpcd: upgraded: the new process serves; draining"`); got != *upgrades {
		t.Errorf("%d upgraded lines in the log, want %d", got, *upgrades)
	}

	// systemd: READY=1 from the first, MAINPID from each old process (the
	// main one then) and MAINPID, READY=1 from each new one, STOPPING=1
	// from the last.
	var notes []string
	for n := range s.notes {
		notes = append(notes, n)
	}
	want := map[string]int{"READY=1\nSTATUS=serving on " + s.addr: 1}
	for _, pid := range s.pids[1:] {
		want["MAINPID="+strconv.Itoa(pid)]++
		want["MAINPID="+strconv.Itoa(pid)+"\nREADY=1\nSTATUS=serving on "+s.addr]++
	}
	want["STOPPING=1\nSTATUS=draining on terminated"]++
	got := map[string]int{}
	for _, n := range notes {
		got[n]++
	}
	for n, c := range want {
		if got[n] != c {
			t.Errorf("systemd heard %q %d times, want %d", n, got[n], c)
		}
	}
	if len(notes) != 2+2*(len(s.pids)-1) {
		t.Errorf("systemd heard %d messages, want %d: %q", len(notes), 2+2*(len(s.pids)-1), notes)
	}
	if len(notes) > 0 && !strings.HasPrefix(notes[len(notes)-1], "STOPPING=1") {
		t.Errorf("the last notification is %q, want STOPPING=1", notes[len(notes)-1])
	}

	slices.Sort(toServe)
	slices.Sort(toExit)
	t.Logf("%d upgrades, pids %v; SIGUSR2 to the new process serving: median %v, max %v; to the old one's exit: median %v, max %v",
		len(toServe), s.pids, toServe[len(toServe)/2], toServe[len(toServe)-1], toExit[len(toExit)/2], toExit[len(toExit)-1])
	t.Logf("RPC calls %d (failed %d), connections dialled %d (refused or reset %d), connections churned %d, gateway requests %d (errors %d), ran twice %d",
		l.calls.Load(), l.failed.Load(), l.dials.Load(), l.dialFailed.Load(), l.churned.Load(), l.requests.Load(), l.httpFails.Load(), twice)
}

// replaceProgram puts a program with text (a script) or the bytes of the
// file from at path, as a package upgrade does: written aside and renamed
// over it.
func replaceProgram(t *testing.T, path, text, from string) {
	t.Helper()
	b := []byte(text)
	if from != "" {
		var err error
		if b, err = os.ReadFile(from); err != nil {
			t.Fatal(err)
		}
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestProcessUpgradeFailures upgrades a server under load to a program
// that exits at once, then to one that never serves, asking for another
// upgrade meanwhile (refused, by SIGUSR2 and by rpcd upgrade), and last
// to rpcd again with rpcd upgrade: the old process serves throughout, and
// no call fails.
func TestProcessUpgradeFailures(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "rpcd")
	replaceProgram(t, exe, "", rpcdBin)
	s := startUpgradable(t, exe, "-upgrade-timeout", "3s", "-drain-timeout", "5s")
	l := startUpgradeLoad(t, s)
	time.Sleep(100 * time.Millisecond)
	first := s.pid

	// A program that exits at once.
	replaceProgram(t, exe, "#!/bin/sh\nexit 3\n", "")
	if err := syscall.Kill(s.pid, syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	s.waitLog("exited before it served: exit status 3", 1)

	// A program that never serves; a second upgrade meanwhile.
	replaceProgram(t, exe, "#!/bin/sh\nexec sleep 60\n", "")
	hung := make(chan result, 1)
	go func() { hung <- upgradeCommand(s.admin) }()
	s.waitLog(`msg="rpcd: upgrading: starting the new process"`, 2)
	if err := syscall.Kill(s.pid, syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	s.waitLog(`msg="rpcd: upgrade refused" err="rpcd: an upgrade is running"`, 1)
	if r := rpcd(t, "", "upgrade", "-admin", s.admin); r.code != 1 || !strings.Contains(r.stderr, "rpcd: an upgrade is running") {
		t.Errorf("rpcd upgrade while one runs: exit %d, stderr %q; want 1 and %q", r.code, r.stderr, "rpcd: an upgrade is running")
	}
	r := <-hung
	if want := "did not serve within 3s (upgrade-timeout) and was killed; the old process serves on"; r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("rpcd upgrade to a program that never serves: exit %d, stderr %q; want 1 and %q", r.code, r.stderr, want)
	}
	if got := s.waitPIDFile(-1); got != first {
		t.Errorf("after two failed upgrades the pid file names %d, want %d", got, first)
	}

	// rpcd again.
	replaceProgram(t, exe, "", rpcdBin)
	r = rpcd(t, "", "upgrade", "-admin", s.admin)
	m := regexp.MustCompile(`^upgraded: pid (\d+) serves; pid (\d+) drains\n$`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil || m[2] != strconv.Itoa(first) {
		t.Fatalf("rpcd upgrade: exit %d, stdout %q, stderr %q; log:\n%s", r.code, r.stdout, r.stderr, s.log())
	}
	pid, _ := strconv.Atoi(m[1])
	if got := s.waitPIDFile(first); got != pid {
		t.Errorf("the pid file names %d, rpcd upgrade said %d", got, pid)
	}
	s.adopt(pid)
	if ws := s.waitExit(first); !ws.Exited() || ws.ExitStatus() != 0 {
		t.Errorf("the old process ended with %v, want exit status 0", ws)
	}
	time.Sleep(100 * time.Millisecond)
	l.end()
	s.stop()
	l.judge(t, s.ledger)
	if got := strings.Count(s.log(), `msg="rpcd: upgrade failed; serving on"`); got != 2 {
		t.Errorf("%d upgrade failed lines, want 2; log:\n%s", got, s.log())
	}
	t.Logf("RPC calls %d (failed %d), connections dialled %d (refused or reset %d), gateway requests %d (errors %d)",
		l.calls.Load(), l.failed.Load(), l.dials.Load(), l.dialFailed.Load(), l.requests.Load(), l.httpFails.Load())
}

// upgradeCommand runs `rpcd upgrade -admin admin` as rpcd does, but fails
// no test: it may run on a goroutine of its own.
func upgradeCommand(admin string) result {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, rpcdBin, "upgrade", "-admin", admin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
		stderr.WriteString(err.Error())
	}
	return result{stdout.String(), stderr.String(), code}
}

// TestProcessUpgradeEtcd upgrades a server registered in etcd: the node's
// key is never deleted, and once the old process has exited it is still
// there, under the new process's lease.
func TestProcessUpgradeEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	ep := etcdtest.Start(t)
	s := startUpgradable(t, rpcdBin, "-etcd", ep, "-service", "up")
	cli, err := etcd.NewClient([]string{ep})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), upgradeWait)
	defer cancel()
	key := etcd.Key("up", s.addr)
	before, err := cli.Get(ctx, key)
	if err != nil || len(before.Kvs) != 1 {
		t.Fatalf("the node's key %s before the upgrade: %v, %v", key, before, err)
	}
	events := cli.Watch(ctx, key, clientv3.WithRev(before.Header.Revision+1))

	s.upgrade()
	after, err := cli.Get(ctx, key)
	if err != nil || len(after.Kvs) != 1 {
		t.Fatalf("the node's key once the old process exited: %v, %v; log:\n%s", after, err, s.log())
	}
	if after.Kvs[0].Lease == before.Kvs[0].Lease {
		t.Errorf("the key is under the old process's lease %x still", before.Kvs[0].Lease)
	}
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(before.Kvs[0].Lease)); err == nil {
		t.Errorf("the old process's lease %x outlived it", before.Kvs[0].Lease)
	}
	s.stop() // deregisters: a delete, the first
	for w := range events {
		for _, ev := range w.Events {
			if ev.Type == clientv3.EventTypeDelete {
				if rev := ev.Kv.ModRevision; rev <= after.Header.Revision {
					t.Errorf("the key was deleted at revision %d, before the new process stopped", rev)
				}
				return
			}
		}
	}
	t.Errorf("no delete of the key once the new process stopped: %v", ctx.Err())
}

// TestProcessUpgradeUnix upgrades a server whose RPC port is a Unix
// socket: its file stays while the old process drains and exits, calls
// reach the new process through it, and the last process's stop removes
// it.
func TestProcessUpgradeUnix(t *testing.T) {
	dir, err := os.MkdirTemp("", "rpcd-up-") // short: a socket's path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "rpcd.sock")
	s := startUpgradable(t, rpcdBin, "-addr", "unix://"+path)
	call := func(key string) {
		t.Helper()
		c, err := client.Dial(context.Background(), "unix://"+path, client.Options{})
		if err != nil {
			t.Fatalf("dialling %s: %v", path, err)
		}
		defer c.Close()
		if reply, err := c.CallRaw(context.Background(), load.ChaosRecord, []byte(key), nil); err != nil || string(reply) != "ok" {
			t.Fatalf("a call: %q, %v", reply, err)
		}
	}
	call("0-0")
	s.upgrade()
	call("0-1")
	s.upgrade()
	call("0-2")
	s.stop()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket's file once the last process stopped: %v, want none", err)
	}
	if b, _ := os.ReadFile(s.ledger); string(b) != "0-0\n0-1\n0-2\n" {
		t.Errorf("the ledger has %q", b)
	}
}
