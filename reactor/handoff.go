package reactor

import (
	"net"
	"os"

	"github.com/panjf2000/gnet/v2"
)

// A connection leaves its event loop for a goroutine of its own, the
// standard library transport's (std.go), when it needs what gnet cannot
// do: to stop reading while its output waits for the peer (the socket did
// not take a wake-up's output whole), to go on writing after the peer's
// FIN (half-close), or to linger after its GoAway so that closing does not
// reset the connection and destroy the GoAway. gnet reads whatever
// arrives, closes at a FIN, and closes at once when told to.
//
// The goroutine takes over the socket (a duplicate of the loop's
// descriptor, which gnet then closes), what gnet had read and the server
// had not run, the large frame being gathered, and the output the socket
// did not take; the connection's state is the same conn, so its calls,
// streams and subscriptions go on. It stays on its goroutine until it
// ends: a connection that once waited for its peer may wait again, and
// moving back would cost more than it saves.

// handOff moves c, on gc's loop, to a goroutine of its own; ending says
// the connection is to end after what it owes is written (its GoAway is
// in it), lingering. It reports false if the socket could not be taken
// over, in which case the loop closes it as before. The loop must return
// gnet.Close after it either way, and touch c no more if it succeeded.
func (c *conn) handOff(gc gnet.Conn, ending bool) bool {
	if gc.Fd() < 0 { // no socket (a test's connection)
		return false
	}
	nc, err := takeSocket(gc)
	if err != nil {
		c.s.log.Warn("rpcd: a connection could not leave its event loop; closing it", "remote", c.remote, "err", err)
		return false
	}
	carry, _ := gc.Peek(-1) // a view of gnet's buffer: copied before gnet closes
	l := newStdLink(nc, carry)
	gc.SetContext(nil)     // OnClose: no longer the loop's to forget
	c.lw = c.s.ownWatch(c) // its inline calls run on its goroutine now
	c.std.Store(l)         // before the goroutine starts: every wake from here reaches it
	c.s.stdConns.Add(1)
	c.s.stats.handedOff.Add(1)
	go func() {
		defer c.s.stdConns.Done()
		c.runStd(l, ending)
	}()
	return true
}

// takeSocket returns a net.Conn on a duplicate of gc's socket, served by
// Go's network poller.
func takeSocket(gc gnet.Conn) (net.Conn, error) {
	fd, err := gc.Dup()
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "rpcd connection")
	defer f.Close()
	return net.FileConn(f) // a duplicate of its own
}
