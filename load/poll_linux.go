package load

import (
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/rpcd/rpcd/internal/epoll"
	"github.com/rpcd/rpcd/internal/loadgen"
)

// In an open loop on Linux each pacer owns an epoll instance holding its
// connections' sockets, as a C client's event loop would: it waits for
// replies or its wheel's next tick, reads every readable connection and
// handles its frames there (writing the calls that were waiting for
// them), then makes the calls that came due. No goroutine is woken per
// reply.
//
// The pacer waits on its instance in the runtime's poller, its deadline
// the wheel's next tick, and a socket is in the instance alone: a
// connection's goroutine hands its pacer a duplicate of the socket's
// descriptor and closes the net.Conn (package epoll says why). The pacer
// reads the duplicate raw; writers (with the connection's lock) write it
// raw, waiting in ppoll when it has no room.
//
// What it bought on 2 cores against a goroutine reading each connection
// (rpcd soak, its own child server, medians of interleaved runs): at
// 10,000 connections × 10 calls/s (past saturation, 6 runs each) 68.5 k
// calls/s against 60.1 k (1.14×, though one set of 4 gave 1.03×: runs
// vary by ±15 %), 15 % less load CPU and 10 % less server CPU per call;
// below saturation 6–14 % less load CPU per call and the server's the
// same (1,000 × 50/s, 6 pairs: 1.00×; 10,000 × 5/s, 3 pairs: 1.01×).
// Blocking in epoll_wait, the sockets in both pollers, it had cost
// 11–17 % more load CPU and 19–34 % more server CPU per call below
// saturation.
//
// A connection's goroutine still dials and redials it; between, it hands
// the connection to its pacer and waits for the pacer to hand it back,
// lost, with why. Only the goroutine closes the duplicate, after the
// pacer has taken it out of its epoll instance and let go of it, and
// after taking it from the writers (wfd, under the lock), so a descriptor
// in an epoll instance is never closed (and reused) while its pacer may
// read it; anyone else who must end it shuts it down (shutdownLocked),
// which the pacer reads as its end.

// A poller is a pacer's epoll instance and the connections handed to it.
type poller struct {
	in *epoll.Instance
	dl time.Duration // in's deadline, on the driver's clock

	mu     sync.Mutex
	handed []handoff // to register at the loop's next turn
	closed bool      // the loop has ended: it takes none
}

// handoff is a connection handed to a pacer: c's nc, whose socket fd (a
// duplicate of nc's) is.
type handoff struct {
	c  *wireConn
	nc net.Conn
	fd int
}

// newPollers returns an epoll instance for each of n pacers, or nil if
// they cannot have them (the pacers then tick, and connections'
// goroutines read).
func newPollers(n int) []*poller {
	ps := make([]*poller, 0, n)
	for range n {
		in, err := epoll.New(256, "pacer")
		if err != nil {
			for _, p := range ps {
				p.in.Close()
			}
			return nil
		}
		ps = append(ps, &poller{in: in, dl: -1})
	}
	return ps
}

// handOver gives nc, c's connection, to its pacer to read, and returns
// the error it was lost with once the pacer has let go of it; at once if
// the pacer has ended. nc is closed: the pacer reads a duplicate of its
// socket, which handOver closes once the pacer has let go of it. Run on
// c's goroutine.
func (c *wireConn) handOver(p *poller, nc net.Conn, rio *rawIO) error {
	fd, err := rio.dup()
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.nc == nc {
		c.wfd = fd // writers write the duplicate from now on
	}
	c.mu.Unlock()
	nc.Close() // out of the runtime's poller; the socket stays fd's
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		err = net.ErrClosed
	} else {
		p.handed = append(p.handed, handoff{c, nc, fd})
		p.mu.Unlock()
		err = <-c.lostc
	}
	c.mu.Lock()
	if c.wfd == fd {
		c.wfd = -1
	}
	c.mu.Unlock()
	syscall.Close(fd)
	return err
}

// shutdownLocked ends c's connection, which its pacer reads, both ways
// without closing a descriptor: the pacer reads the end and hands it back,
// and a writer waiting for room wakes to an error. With c.mu held.
func (c *wireConn) shutdownLocked() {
	switch {
	case c.wfd >= 0:
		_ = syscall.Shutdown(c.wfd, syscall.SHUT_RDWR)
	case c.rio != nil:
		c.rio.shutdown() // not handed over yet: the duplicate shares the socket
	}
}

// poll is pacer k's loop over its epoll instance until the driver
// closes: wait for a reply or the wheel's next tick, read and handle
// what came, make the calls that came due.
func (d *wireDriver) poll(k int) {
	defer d.wg.Done()
	w, p := d.pacers[k], d.polls[k]
	defer p.end(d, k)
	for d.ctx.Err() == nil {
		p.register(d)
		if next := (d.now()/loadgen.WheelTick + 1) * loadgen.WheelTick; next != p.dl {
			p.dl = next
			_ = p.in.SetDeadline(d.clock.Add(next))
		}
		evs, err := p.in.Wait()
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			panic("rpcd: load: the pacer's epoll instance: " + err.Error())
		}
		for _, ev := range evs {
			c := d.cs[ev.Fd]
			if c.pnc == nil {
				continue // let go of earlier in this batch
			}
			if err := drain(uintptr(c.pfd), c.free, c.gotPolled, true); err != errWait {
				p.release(c, err)
			}
		}
		w.Fire(d.now(), callDue)
	}
}

// gotPolled is got on the connection the pacer reads.
func (c *wireConn) gotPolled(n int) error { return c.got(c.pnc, n) }

// register adds the connections handed over since the last turn to the
// epoll instance, each under its number; one that cannot be added is
// handed back at once.
func (p *poller) register(d *wireDriver) {
	p.mu.Lock()
	handed := p.handed
	p.handed = nil
	p.mu.Unlock()
	for _, h := range handed {
		h.c.pnc, h.c.pfd = h.nc, h.fd
		// Level-triggered: an end that came in with the last bytes keeps
		// the socket ready, so drain may stop at a short read.
		if err := p.in.Ctl(syscall.EPOLL_CTL_ADD, h.fd, syscall.EPOLLIN, int32(h.c.i)); err != nil {
			p.release(h.c, err)
		}
	}
}

// release takes c's connection out of the epoll instance and hands it
// back to c's goroutine, lost with err; from then on the pacer does not
// read it.
func (p *poller) release(c *wireConn, err error) {
	_ = p.in.Ctl(syscall.EPOLL_CTL_DEL, c.pfd, 0, 0)
	c.pnc, c.pfd = nil, -1
	c.lostc <- err
}

// end hands every connection of pacer k back as closed, takes no more,
// and closes the epoll instance.
func (p *poller) end(d *wireDriver, k int) {
	p.mu.Lock()
	p.closed = true
	handed := p.handed
	p.handed = nil
	p.mu.Unlock()
	for _, h := range handed {
		h.c.lostc <- net.ErrClosed
	}
	for i := k; i < len(d.cs); i += len(d.pacers) {
		if c := d.cs[i]; c.pnc != nil {
			p.release(c, net.ErrClosed)
		}
	}
	p.in.Close()
}
