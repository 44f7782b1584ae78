package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cloudflare/tableflip"

	"github.com/rpcd/rpcd/reactor"
)

// A binary upgrade (WithUpgrades; SIGUSR2, rpcd upgrade, Daemon.Upgrade)
// starts the program again, at the path it was started as, with the same
// arguments and environment, so that it reads the same configuration; the
// new process inherits every listening socket (the RPC port, the gateway,
// the admin listener), serves on them and says so; only then the old one
// stops accepting and drains (handOver). The accept queues never close, so
// no connection is refused. cloudflare/tableflip does the hand-over: the
// descriptors, the readiness pipe, the timeout that kills a new process
// that does not serve in time, one upgrade at a time, and the new
// process's refusal to be upgraded before the old one has exited.

// DefaultUpgradeTimeout is Config.UpgradeTimeout's default: how long the
// new process of an upgrade has to serve. It covers registering in etcd
// (at most 10 s) with room to spare.
const DefaultUpgradeTimeout = 30 * time.Second

// ErrUpgradeRunning is the refusal of an upgrade asked for while another
// runs, or while the process that an upgrade replaced with this one has
// not exited yet.
var ErrUpgradeRunning = errors.New("rpcd: an upgrade is running")

// ErrNoUpgrade is the refusal of an upgrade by a daemon that takes none:
// made without WithUpgrades, on Windows, not serving yet, or draining.
var ErrNoUpgrade = errors.New("rpcd: no upgrade")

const (
	// flipParentEnv is the variable tableflip sets in the environment of
	// the new process it starts: the sign that this process was started
	// by an upgrade and has listeners to take from its parent.
	flipParentEnv = "TABLEFLIP_HAS_PARENT_7DIU3"
	// readyFile names the pipe, passed with the listeners, on which a new
	// process writes its pid once it serves, for the old one's log,
	// Upgrade's result and systemd's MAINPID.
	readyFile = "rpcd-upgrade-ready"
	// handOverGrace bounds how long the old process's gateway waits for
	// its connections to end after their next response (which says
	// Connection: close) before it closes those left idle.
	handOverGrace = time.Second
)

// WithUpgrades has the daemon take binary upgrades, as rpcd serve does:
// RunSignals upgrades on SIGUSR2, the admin listener on POST /upgrade from
// this machine (RequestUpgrade), and a program on Upgrade. A daemon that an
// upgrade started takes its listeners from the process it replaces. Only
// one daemon in a process takes upgrades, and only the listeners it opens
// from its Config's addresses are handed over, not those given with
// WithListeners. Upgrades need Linux, macOS or another Unix.
func WithUpgrades() Option {
	return func(d *Daemon) { d.up = &upgrades{d: d, done: make(chan struct{})} }
}

// upgrades is the daemon's part in binary upgrades (WithUpgrades).
type upgrades struct {
	d      *Daemon
	child  bool          // an upgrade started this process
	served bool          // it has said it serves
	parent int           // then the pid of the process it replaces
	lns    []handed      // the listeners the daemon opened, to hand over
	done   chan struct{} // closed once a new process serves: Run hands over
	// gwConns counts the gateway's open connections, which the hand-over
	// waits for; handing is set from the hand-over on: the gateway's
	// responses then say Connection: close.
	gwConns atomic.Int64
	handing atomic.Bool
	gwLn    net.Listener // the gateway's, if the daemon opened it

	mu      sync.Mutex
	running bool // an upgrade runs, or one has succeeded
	stopped bool // the daemon drains or has stopped: no more upgrades
	added   bool // the listeners are the upgrader's
	readyR  *os.File
	newPID  int
}

// handed is a listener to hand over, under tableflip's name for it.
type handed struct {
	network, name string
	ln            net.Listener
}

// flipper is the process's one tableflip.Upgrader, made by the first
// daemon to need it: at start in a process an upgrade started, else at
// its first upgrade.
var flipper struct {
	sync.Mutex
	u     *tableflip.Upgrader
	owner *upgrades
}

// upgrader returns the process's upgrader, making it if need be.
func (u *upgrades) upgrader() (*tableflip.Upgrader, error) {
	flipper.Lock()
	defer flipper.Unlock()
	if flipper.owner != nil && flipper.owner != u {
		return nil, fmt.Errorf("%w: another daemon in this process takes them", ErrNoUpgrade)
	}
	if flipper.u == nil {
		f, err := tableflip.New(tableflip.Options{UpgradeTimeout: u.d.cfg.UpgradeTimeout})
		if errors.Is(err, tableflip.ErrNotSupported) {
			return nil, fmt.Errorf("%w on this system", ErrNoUpgrade)
		}
		if err != nil {
			return nil, fmt.Errorf("rpcd: upgrades: %v", err)
		}
		if !f.HasParent() {
			_ = f.Ready() // an upgrader upgrades only once ready; with no parent it only notes it
		}
		flipper.u = f
	}
	flipper.owner = u
	return flipper.u, nil
}

// listen opens the listeners of the Config's addresses that the program
// gave none for (WithListeners), or takes them from the process an upgrade
// started this one from, and keeps them to hand over. An error comes with
// the key of the setting whose listener failed, and its value. Nothing on
// a nil u.
func (u *upgrades) listen() (setting []any, err error) {
	if u == nil {
		return nil, nil
	}
	d := u.d
	var flip *tableflip.Upgrader
	if os.Getenv(flipParentEnv) != "" {
		if flip, err = u.upgrader(); err != nil {
			return nil, err
		}
		u.child, u.parent = true, os.Getppid()
	}
	defer func() {
		if err != nil {
			for _, h := range u.lns {
				h.ln.Close()
			}
			u.lns = nil
		}
	}()
	for _, l := range []struct {
		key, role, addr string
		ln              *net.Listener
	}{{"addr", "rpc", d.cfg.Addr, &d.listeners.RPC}, {"gateway", "gateway", d.cfg.Gateway, &d.listeners.Gateway}, {"admin", "admin", d.cfg.Admin, &d.listeners.Admin}} {
		if l.addr == "" || *l.ln != nil {
			continue
		}
		network, name := handName(l.role, l.addr)
		open := func(string, string) (net.Listener, error) {
			if l.role == "admin" {
				return net.Listen("tcp", l.addr)
			}
			return reactor.Listen(l.addr)
		}
		var ln net.Listener
		if flip != nil {
			ln, err = flip.ListenWithCallback(network, name, open)
		} else {
			ln, err = open(network, name)
		}
		if err != nil {
			return []any{l.key, l.addr}, err
		}
		u.lns = append(u.lns, handed{network, name, ln})
		if l.role == "gateway" {
			u.gwLn = ln
			ln = countedListener{ln, &u.gwConns}
		}
		*l.ln = ln
	}
	return nil, nil
}

// handName returns the network of a listener on addr and tableflip's name
// for it, which the new process finds it by: a Unix socket's path (which
// tableflip removes when the last process stops), or the role and the
// address of the Config, which may have port 0.
func handName(role, addr string) (network, name string) {
	if path, ok := strings.CutPrefix(addr, "unix://"); ok {
		return "unix", path
	}
	return "tcp", role + "@" + strings.TrimPrefix(addr, "tcp://")
}

// notifyReady tells the process an upgrade started this one from, if any,
// and systemd that the daemon serves, with status.
func (d *Daemon) notifyReady(status string) {
	state := "READY=1\nSTATUS=" + status
	if u := d.up; u != nil && u.child {
		flip, err := u.upgrader()
		if err == nil {
			var f *os.File
			if f, err = flip.File(readyFile); f != nil {
				_, err = fmt.Fprintf(f, "%d\n", os.Getpid())
				f.Close()
			}
		}
		if err == nil {
			err = flip.Ready()
		}
		u.served = true
		if err != nil {
			d.log.Warn("rpcd: cannot tell the old process that this one serves; it will stop it", "err", err)
		} else {
			d.log.Info("rpcd: serving in place of the old process", "old_pid", os.Getppid())
		}
		state = "MAINPID=" + strconv.Itoa(os.Getpid()) + "\n" + state
	}
	notifySystemd(d.log, state)
}

// Upgrade upgrades the daemon's process to the program at the path it was
// started as, which after a package upgrade is the new binary: it starts
// it with the same arguments and environment, hands it the listeners, and
// returns the new process's pid once it serves; Run then drains as on a
// signal, but for the etcd registration, which the new process holds, and
// returns. If the new process exits first, or does not serve within
// Config.UpgradeTimeout (it is killed then), the error says so and this one
// serves on. An upgrade asked for while one runs is refused with
// ErrUpgradeRunning; a daemon made without WithUpgrades, or that is not
// serving, refuses with ErrNoUpgrade. Each outcome is logged. If ctx ends
// first, Upgrade returns its error and the upgrade goes on.
func (d *Daemon) Upgrade(ctx context.Context) (int, error) {
	u := d.up
	if u == nil {
		return 0, fmt.Errorf("%w: the daemon was made without WithUpgrades", ErrNoUpgrade)
	}
	select {
	case <-d.ready:
	default:
		return 0, d.refuse(fmt.Errorf("%w: not serving yet", ErrNoUpgrade))
	}
	u.mu.Lock()
	switch {
	case u.stopped || d.draining.Load():
		u.mu.Unlock()
		return 0, d.refuse(fmt.Errorf("%w: draining", ErrNoUpgrade))
	case u.running:
		u.mu.Unlock()
		return 0, d.refuse(ErrUpgradeRunning)
	}
	u.running = true
	u.mu.Unlock()
	type result struct {
		pid int
		err error
	}
	res := make(chan result, 1)
	go func() {
		pid, err := u.run()
		res <- result{pid, err}
	}()
	select {
	case r := <-res:
		return r.pid, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// refuse logs an upgrade refused and returns err.
func (d *Daemon) refuse(err error) error {
	d.log.Warn("rpcd: upgrade refused", "err", err)
	return err
}

// run runs an upgrade that Upgrade let start.
func (u *upgrades) run() (pid int, err error) {
	d := u.d
	defer func() {
		if err != nil {
			u.mu.Lock()
			u.running = false
			u.mu.Unlock()
		}
	}()
	begin := time.Now()
	flip, err := u.prepare()
	if err != nil {
		return 0, d.refuse(err)
	}
	d.log.Info("rpcd: upgrading: starting the new process", "program", os.Args[0], "timeout", d.cfg.UpgradeTimeout.String())
	err = flip.Upgrade()
	for i := 0; err != nil && u.notYet(err) && i < 200; i++ {
		time.Sleep(5 * time.Millisecond)
		err = flip.Upgrade()
	}
	if err != nil {
		err = u.upgradeError(err)
		if errors.Is(err, ErrUpgradeRunning) || errors.Is(err, ErrNoUpgrade) {
			return 0, d.refuse(err)
		}
		d.log.Error("rpcd: upgrade failed; serving on", "err", err, "after", time.Since(begin).Round(time.Millisecond).String())
		return 0, err
	}
	pid = u.readyPID()
	d.log.Info("rpcd: upgraded: the new process serves; draining", "pid", pid, "after", time.Since(begin).Round(time.Millisecond).String())
	if pid > 0 { // for a unit whose NotifyAccess= lets only the main process speak
		notifySystemd(d.log, "MAINPID="+strconv.Itoa(pid))
	}
	u.mu.Lock()
	u.newPID = pid
	u.mu.Unlock()
	close(u.done)
	return pid, nil
}

// notYet reports whether the upgrader refused an upgrade for what it has
// not seen yet but will within moments: that Ready was called (its loop
// may take a request first), or that the process this one replaced has
// exited (it learns so from a pipe that the exit closes).
func (u *upgrades) notYet(err error) bool {
	switch err.Error() {
	case "process is not ready yet":
		return true
	case "parent hasn't exited":
		return u.child && os.Getppid() != u.parent
	}
	return false
}

// prepare returns the upgrader with the listeners and the pipe of the new
// process's pid in its hands.
func (u *upgrades) prepare() (*tableflip.Upgrader, error) {
	flip, err := u.upgrader()
	if err != nil {
		return nil, err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.added && !u.child { // a new process's listeners are the upgrader's from the start
		for _, h := range u.lns {
			fl, ok := h.ln.(tableflip.Listener)
			if !ok {
				return nil, fmt.Errorf("%w: the listener of %s is a %T, which cannot be handed over", ErrNoUpgrade, h.name, h.ln)
			}
			if err := flip.AddListener(h.network, h.name, fl); err != nil {
				return nil, fmt.Errorf("rpcd: upgrades: %v", err)
			}
		}
	}
	u.added = true
	if u.readyR == nil {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("rpcd: upgrades: %w", err)
		}
		err = flip.AddFile(readyFile, w) // the upgrader keeps a copy
		w.Close()
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("rpcd: upgrades: %v", err)
		}
		u.readyR = r
	}
	return flip, nil
}

// readyPID reads the pid the new process wrote before it said it serves:
// the last one written, should a process that failed have written one.
func (u *upgrades) readyPID() int {
	buf := make([]byte, 512)
	_ = u.readyR.SetReadDeadline(time.Now().Add(time.Second))
	n, _ := u.readyR.Read(buf)
	lines := strings.Fields(string(buf[:n]))
	if len(lines) == 0 {
		return 0
	}
	pid, _ := strconv.Atoi(lines[len(lines)-1])
	return pid
}

// upgradeError turns tableflip's errors, which are text, into rpcd's.
func (u *upgrades) upgradeError(err error) error {
	msg := err.Error()
	if m := flipExited.FindStringSubmatch(msg); m != nil {
		if m[2] == "" {
			m[2] = "exit status 0"
		}
		return fmt.Errorf("rpcd: upgrade failed: the new process (pid %s) exited before it served: %s", m[1], m[2])
	}
	if m := flipTimedOut.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("rpcd: upgrade failed: the new process (pid %s) did not serve within %v (upgrade-timeout) and was killed", m[1], u.d.cfg.UpgradeTimeout)
	}
	switch {
	case msg == "upgrade in progress":
		return ErrUpgradeRunning
	case msg == "parent hasn't exited":
		return fmt.Errorf("%w: the process this one replaced (pid %d) has not exited yet", ErrUpgradeRunning, os.Getppid())
	case msg == "terminating" || msg == "already upgraded":
		return fmt.Errorf("%w: draining", ErrNoUpgrade)
	}
	return fmt.Errorf("rpcd: upgrade failed: %s", strings.Replace(msg, "can't start child: ", "cannot start the new process: ", 1))
}

// tableflip's messages of a new process that failed.
var (
	flipExited   = regexp.MustCompile(`^child pid=(\d+) exited(?:: (.*))?$`)
	flipTimedOut = regexp.MustCompile(`^new child pid=(\d+) timed out$`)
)

// handedOver returns a channel closed once an upgrade's new process
// serves; nil (never ready) on a nil u.
func (u *upgrades) handedOver() <-chan struct{} {
	if u == nil {
		return nil
	}
	return u.done
}

// signals relays SIGUSR2, on which RunSignals upgrades, until stop; a nil
// channel on a nil u or on Windows.
func (u *upgrades) signals() (sigs <-chan os.Signal, stop func()) {
	if u == nil || upgradeSignal == nil {
		return nil, func() {}
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, upgradeSignal)
	return ch, func() { signal.Stop(ch) }
}

// handingOver reports whether the daemon drains after an upgrade: the
// gateway's responses then say Connection: close.
func (u *upgrades) handingOver() bool { return u != nil && u.handing.Load() }

// stop ends the daemon's upgrades when it drains or fails to start: an
// upgrade running is stopped (its new process killed), and so are the
// upgrader's copies of the listeners (a Unix socket's file is removed).
// A new process that fails before it serves leaves them, and the files,
// to the old one, which serves on. Nothing on a nil u.
func (u *upgrades) stop() {
	if u == nil {
		return
	}
	u.mu.Lock()
	u.stopped = true
	u.mu.Unlock()
	if u.child && !u.served {
		return
	}
	flipper.Lock()
	if flipper.owner == u {
		flipper.u.Stop()
	}
	flipper.Unlock()
}

// handOver drains after an upgrade, as drain does after a signal, but for
// what the new process now serves: the admin listener closes first; the
// node's lease in etcd is revoked, not its key, which the new process has
// put under a lease of its own; systemd hears nothing (its main process is
// the new one); the gateway's connections end after their next response
// rather than refuse calls; and the pid file stays the new process's.
func (d *Daemon) handOver() error {
	u := d.up
	timeout := d.cfg.DrainTimeout
	d.draining.Store(true)
	u.handing.Store(true)
	u.mu.Lock()
	pid := u.newPID
	u.mu.Unlock()
	d.log.Info("rpcd: draining; the new process serves", "pid", pid, "timeout", timeout.String())
	d.adm.stop()
	if d.node != nil {
		ctx, cancel := context.WithTimeout(context.Background(), etcdRegisterTimeout)
		if err := d.node.reg.Deregister(ctx); err != nil {
			d.log.Warn("rpcd: revoking the etcd lease failed; it will expire", "err", err)
		} else {
			d.log.Info("rpcd: etcd lease revoked; the key stays the new process's", "key", d.node.reg.Key())
		}
		cancel()
		d.node.close()
	}
	ctx, cancel := context.WithTimeout(d.closed, timeout)
	defer cancel()
	gwErr := make(chan error, 1)
	go func() { gwErr <- d.handOverGateway(ctx) }()
	err := errors.Join(d.srv.Shutdown(ctx), <-gwErr)
	d.stopRecording()
	closed := d.closed.Err() != nil
	if err != nil && !closed {
		d.log.Error("rpcd: drain timed out; calls still in flight were cancelled", "timeout", timeout.String(), "err", err)
	}
	u.stop()
	d.stopTracing()
	if !closed {
		d.log.Info("rpcd: stopped")
	}
	return err
}

// handOverGateway stops the gateway after an upgrade: it closes its
// listener, waits up to handOverGrace for its connections to end (each
// ends after its next response, which says Connection: close), then shuts
// the server down, which closes those left idle and waits for the
// requests running. Calls are never refused meanwhile.
func (d *Daemon) handOverGateway(ctx context.Context) error {
	g := d.gw
	if g == nil {
		return nil
	}
	if ln := d.up.gwLn; ln != nil {
		ln.Close() // the new process accepts them all
	}
	grace := time.NewTimer(handOverGrace)
	defer grace.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
wait:
	for d.up.gwConns.Load() > 0 {
		select {
		case <-tick.C:
		case <-grace.C:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	err := g.srv.Shutdown(ctx)
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	if serveErr := <-g.done; err == nil && !errors.Is(serveErr, http.ErrServerClosed) && !errors.Is(serveErr, net.ErrClosed) {
		err = serveErr
	}
	return err
}

// countedListener counts the connections it accepted that are not closed
// yet in n.
type countedListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.n.Add(1)
	return &countedConn{Conn: c, n: l.n}, nil
}

// countedConn is a connection of a countedListener.
type countedConn struct {
	net.Conn
	n    *atomic.Int64
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.n.Add(-1) })
	return err
}

// writePIDFile writes this process's pid to Config.PIDFile, if set, in a
// file of its own renamed into place, so that no reader sees half of it.
func (d *Daemon) writePIDFile() error {
	path := d.cfg.PIDFile
	if path == "" {
		return nil
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%d\n", os.Getpid())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// removePIDFile removes Config.PIDFile if it still names this process.
func (d *Daemon) removePIDFile() {
	if d.cfg.PIDFile == "" {
		return
	}
	if b, err := os.ReadFile(d.cfg.PIDFile); err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(os.Getpid()) {
		os.Remove(d.cfg.PIDFile)
	}
}
