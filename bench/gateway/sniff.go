package main

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/rpcd/rpcd/proto"
)

// sniffer is the main-port option measured here: it accepts connections on
// one listener and, once a connection's first byte has come, hands it to
// the rpcd listener (rpcd's magic, 'R') or to the HTTP one (anything else:
// "POST ", "GET "). It peeks with MSG_PEEK, so the bytes stay in the
// socket: gnet takes the descriptor and reads them itself, and the rpcd
// path after the hand-off is the one a plain listener gives.
type sniffer struct {
	ln         net.Listener
	rpcd, http *chanListener
	timeout    time.Duration // for the first byte
	wg         sync.WaitGroup
}

func newSniffer(ln net.Listener, timeout time.Duration) *sniffer {
	return &sniffer{ln: ln, rpcd: newChanListener(ln.Addr()), http: newChanListener(ln.Addr()), timeout: timeout}
}

// serve accepts until the listener is closed.
func (s *sniffer) serve() {
	defer func() {
		s.wg.Wait()
		s.rpcd.Close()
		s.http.Close()
	}()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go s.classify(c) // a goroutine per connection: the first byte may take a while
	}
}

// classify waits for c's first byte and hands c on.
func (s *sniffer) classify(c net.Conn) {
	defer s.wg.Done()
	tc, ok := c.(*net.TCPConn)
	if !ok {
		c.Close()
		return
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		c.Close()
		return
	}
	var b [1]byte
	var n int
	var perr error
	_ = tc.SetReadDeadline(time.Now().Add(s.timeout))
	err = raw.Read(func(fd uintptr) bool {
		n, _, perr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK)
		return !errors.Is(perr, syscall.EAGAIN)
	})
	_ = tc.SetReadDeadline(time.Time{})
	if err != nil || perr != nil || n == 0 {
		c.Close()
		return
	}
	if b[0] == proto.Magic0 {
		s.rpcd.put(c)
	} else {
		s.http.put(c)
	}
}

// chanListener is a net.Listener whose connections are handed to it.
type chanListener struct {
	ch   chan net.Conn
	addr net.Addr
	done chan struct{}
	once sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{ch: make(chan net.Conn), addr: addr, done: make(chan struct{})}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

func (l *chanListener) put(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.done:
		c.Close()
	}
}
