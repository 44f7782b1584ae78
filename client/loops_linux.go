package client

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/rpcd/rpcd/internal/epoll"
)

// Event loops (Options.EventLoops): the process's few epoll instances,
// one per P, that read the connections of every client that asks for
// them, instead of a listener goroutine each. A loop waits for any of its
// sockets to have bytes, reads each such socket until it has no more and
// handles its frames there, as the listener would (readFrame): replies
// complete their calls, and the calls their done functions start go out
// at the batch's end in one write. No goroutine is woken per reply. For a
// program of thousands of connections each with a call or two in flight,
// that wake-up (and the scheduler's netpoll of every socket) was most of
// the difference between the client and a load generator that read its
// connections itself, as the loops do.
//
// A loop waits on its epoll instance in the runtime's poller, and a
// socket is in the loop's instance alone (package epoll says why): the
// wire takes a duplicate of its descriptor and closes the net.Conn, writes
// the duplicate raw, and a write that finds no room waits in ppoll (on a
// writer goroutine or a caller with a deadline: never on the loop).
//
// Sockets are level-triggered in the instance: a loop's turn at a socket
// ends at a read that returns less than the room it was given (fdReader),
// since bytes left, or an end that came with the last ones, keep the
// socket ready for the next wait; reading on until EAGAIN, as an
// edge-triggered socket needs, cost a read per reply. A frame larger than
// the read buffer is read by a goroutine of its own, which waits for its
// bytes (a loop must not): the socket is taken out of the instance's
// reports meanwhile (EPOLL_CTL_MOD to no events), and put back once the
// goroutine has read on to the end of what came and let go of the token.
//
// The descriptor is closed by the last of its users out: the reader, who
// lets go of it once the wire failed (unloop), and the writers and
// shutdowns under way (fdRefs), so that a descriptor is never closed, and
// its number reused by another socket, while anyone may still use it.
// Calls never read for themselves on such a connection (tryLead): a
// sequential Call waits for the loop to deliver its reply.

// testEventLoops puts every connection on a loop, as if each client set
// Options.EventLoops: the client's tests run once so in CI
// (RPCD_TEST_EVENT_LOOPS=1, export_test.go).
var testEventLoops bool

// evLoop is one epoll instance and the goroutine that waits on it while
// it holds sockets.
type evLoop struct {
	in *epoll.Instance

	mu      sync.Mutex
	wires   []*wire // by slot, the events' Fd field; nil where free
	free    []int32
	held    int  // wires in it
	running bool // its goroutine runs
}

// evLoops are the process's loops, made at the first client that asks
// for them: one per P then.
var evLoops struct {
	once sync.Once
	ls   []*evLoop
	next atomic.Uint32
}

// pickLoop returns the next loop in turn; nil if the loops could not be
// made.
func pickLoop() *evLoop {
	evLoops.once.Do(func() {
		for range runtime.GOMAXPROCS(0) {
			in, err := epoll.New(256, "rpcd client loop")
			if err != nil {
				for _, l := range evLoops.ls {
					l.in.Close()
				}
				evLoops.ls = nil
				return
			}
			evLoops.ls = append(evLoops.ls, &evLoop{in: in})
		}
	})
	if len(evLoops.ls) == 0 {
		return nil
	}
	return evLoops.ls[int(evLoops.next.Add(1))%len(evLoops.ls)]
}

// loopSocket returns a duplicate of nc's socket descriptor, non-blocking
// and close-on-exec, and closes nc, which takes the socket out of the
// runtime's poller; -1, nc untouched, if nc is no plain socket (TLS, a
// WebSocket, a test's pipe) or the duplicate cannot be made.
func loopSocket(nc net.Conn) int {
	rc := rawConn(nc)
	if rc == nil {
		return -1
	}
	fd, err := epoll.Dup(rc)
	if err != nil {
		return -1
	}
	_ = nc.Close() // the socket stays fd's
	return fd
}

// joinLoop puts w, whose socket is w.fd, in l's epoll instance, starting
// l's goroutine if it is not running. w.wg counts l's hold on w until
// unloop.
func (w *wire) joinLoop(l *evLoop) {
	l.mu.Lock()
	// Set before w is in the table: a stale event for its slot (a wire's
	// that held it before) may find w there at once.
	w.loop = l
	if n := len(l.free); n > 0 {
		w.slot = l.free[n-1]
		l.free = l.free[:n-1]
		l.wires[w.slot] = w
	} else {
		w.slot = int32(len(l.wires))
		l.wires = append(l.wires, w)
	}
	l.held++
	start := !l.running
	l.running = true
	l.mu.Unlock()
	if start {
		go l.run()
	}
	if err := w.watchFd(syscall.EPOLL_CTL_ADD, syscall.EPOLLIN|syscall.EPOLLRDHUP); err != nil {
		// The wire fails at once; its reader lets go as it would, once it
		// holds the token (a stale event may have lent it to the loop).
		for !w.rd.tok.CompareAndSwap(false, true) {
			runtime.Gosched()
		}
		w.fail(os.NewSyscallError("epoll_ctl", err))
		w.unloop()
	}
}

// run is the loop's goroutine: it waits for sockets with bytes and reads
// each, until it holds none.
func (l *evLoop) run() {
	for {
		evs, err := l.in.Wait()
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				panic("rpcd: client: the event loop's epoll instance: " + err.Error())
			}
			_ = l.in.SetDeadline(time.Time{}) // unloop's word that the loop may be empty
		}
		for _, ev := range evs {
			l.mu.Lock()
			w := l.wires[ev.Fd]
			l.mu.Unlock()
			if w != nil && w.rd.tok.CompareAndSwap(false, true) {
				w.pollRead()
			}
		}
		l.mu.Lock()
		if l.held == 0 {
			l.running = false
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
	}
}

// watchFd adds w's socket to its loop's instance (EPOLL_CTL_ADD) or sets
// the events it reports (EPOLL_CTL_MOD), under w's slot.
func (w *wire) watchFd(op int, events uint32) error {
	return w.loop.in.Ctl(op, w.fd, events, w.slot)
}

// What pollRead did with the token.
const (
	letGo  = iota // it let go: the socket had no more bytes
	handed        // it handed it to readLarge
	lost          // the wire is lost, and out of its loop
)

// pollRead reads w's frames, holding its token, until its socket has no
// more bytes for now, and lets go of the token; before a frame larger than
// the read buffer it hands the token to a goroutine (readLarge); a wire
// lost it fails and takes out of its loop.
func (w *wire) pollRead() int {
	w.rd.fdr.short = false
	for {
		n, err := w.readFrame()
		w.rd.listened += uint64(n)
		switch {
		case err == nil:
		case err == errAgain:
			if w.rd.inBatch {
				w.endBatch()
			}
			w.rd.tok.Store(false)
			return letGo
		case err == errLarge:
			if err := w.watchFd(syscall.EPOLL_CTL_MOD, 0); err != nil {
				w.fail(os.NewSyscallError("epoll_ctl", err))
				w.unloop()
				return lost
			}
			go w.readLarge()
			return handed
		default:
			w.fail(err)
			w.unloop()
			return lost
		}
	}
}

// readLarge reads a frame larger than the read buffer for the loop, on a
// goroutine of its own, waiting for its bytes; then reads on as the loop
// would, and gives the socket back to the loop.
func (w *wire) readLarge() {
	src := &w.rd.fdr
	src.block = true
	n, err := w.readFrame()
	src.block = false
	w.rd.listened += uint64(n)
	if err != nil {
		w.fail(err)
		w.unloop()
		return
	}
	if w.pollRead() != letGo {
		return
	}
	// No one reads w while its loop hears nothing of it, so no one lets go
	// of the socket before this.
	if err := w.watchFd(syscall.EPOLL_CTL_MOD, syscall.EPOLLIN|syscall.EPOLLRDHUP); err != nil {
		for !w.rd.tok.CompareAndSwap(false, true) {
			runtime.Gosched()
		}
		w.fail(os.NewSyscallError("epoll_ctl", err))
		w.unloop()
	}
}

// errAgain is the loop's reader's word that the socket has no bytes now.
var errAgain = errors.New("rpcd: client: nothing to read now")

// errLarge is readFrame's word, on a loop, that the next frame is larger
// than the read buffer: it is left unread, for readLarge.
var errLarge = errors.New("rpcd: client: a frame larger than the read buffer")

// unloop takes w, failed, out of its loop, with its read token held for
// good: no one reads it again. It drops the reader's hold on the socket.
func (w *wire) unloop() {
	l := w.loop
	_ = l.in.Ctl(syscall.EPOLL_CTL_DEL, w.fd, 0, 0)
	l.mu.Lock()
	l.wires[w.slot] = nil
	l.free = append(l.free, w.slot)
	l.held--
	empty := l.held == 0
	l.mu.Unlock()
	if empty {
		_ = l.in.SetDeadline(longAgo) // wake the loop to see it is empty and end
	}
	w.dropFd(fdGone - 1)
	w.wg.Done()
}

// fdGone, in wire.fdRefs, marks a descriptor its reader has let go of:
// the last of its users to let go closes it.
const fdGone = 1 << 30

// holdFd takes a hold on w's descriptor for a write or a shutdown; false
// once the reader has let go of it (it may be closed).
func (w *wire) holdFd() bool {
	for {
		n := w.fdRefs.Load()
		if n&fdGone != 0 {
			return false
		}
		if w.fdRefs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// dropFd drops a hold (-1), or the reader's (fdGone-1); the last out
// closes the descriptor.
func (w *wire) dropFd(d int32) {
	if w.fdRefs.Add(d) == fdGone {
		syscall.Close(w.fd)
	}
}

// fdReader reads a loop's socket: a read that finds nothing, or follows a
// read that returned less than its room in the same turn (short), returns
// errAgain; for readLarge (block), it waits in ppoll until there is
// something.
type fdReader struct {
	fd    int
	block bool
	short bool // the turn's last read emptied the socket of bytes
}

func (r *fdReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if r.short && !r.block {
		return 0, errAgain
	}
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(r.fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		switch e {
		case 0:
			if n == 0 {
				return 0, io.EOF
			}
			r.short = int(n) < len(p)
			return int(n), nil
		case syscall.EINTR:
		case syscall.EAGAIN:
			if !r.block {
				return 0, errAgain
			}
			if err := epoll.WaitFd(r.fd, epoll.PollIn, time.Time{}); err != nil {
				return 0, err
			}
		default:
			return 0, os.NewSyscallError("read", e)
		}
	}
}

// loopWriteNow writes b to w's socket as far as it takes it without
// waiting.
func (w *wire) loopWriteNow(b []byte) (int, error) {
	if !w.holdFd() {
		return 0, net.ErrClosed
	}
	n, err := epoll.WriteNow(w.fd, b)
	w.dropFd(-1)
	return n, err
}

// loopWrite writes b to w's socket, waiting for room by deadline (none if
// zero): the rest of a write for the flushing goroutine.
func (w *wire) loopWrite(b []byte, deadline time.Time) (int, error) {
	if !w.holdFd() {
		return 0, net.ErrClosed
	}
	defer w.dropFd(-1)
	return epoll.Write(w.fd, b, deadline)
}

// loopShutdown ends w's socket both ways, keeping its descriptor: its
// loop reads the end and lets go, and a writer waiting for room wakes.
func (w *wire) loopShutdown() {
	if w.holdFd() {
		_ = syscall.Shutdown(w.fd, syscall.SHUT_RDWR)
		w.dropFd(-1)
	}
}
