package ws

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/rpcd/rpcd/internal/linger"
	"github.com/rpcd/rpcd/proto"
)

// Subprotocol is the WebSocket subprotocol a client asks for
// (Sec-WebSocket-Protocol) and the server answers with.
const Subprotocol = "rpcd"

// Path is where `rpcd serve` takes WebSocket connections on its gateway's
// listener.
const Path = "/ws"

// ConnServer serves one connection until it ends; reactor.Server's
// ServeConn is one.
type ConnServer interface {
	ServeConn(net.Conn)
}

// Options configures Handler. The zero Options is valid.
type Options struct {
	// MaxFrameSize bounds a message the server reads, as it bounds a frame
	// on TCP: the largest frame, header included. Default
	// proto.DefaultMaxFrameSize.
	MaxFrameSize int

	// CheckOrigin, if set, decides whether a browser page's Origin may
	// connect. Default: any origin. A connection authenticates with a
	// Hello inside the protocol, never with a cookie the browser adds by
	// itself, so a page of another site gains nothing that its own
	// credentials would not give it.
	CheckOrigin func(r *http.Request) bool

	// Logger receives failed upgrades, at Debug; default slog.Default().
	Logger *slog.Logger

	// LingerTime and LingerBytes bound the lingering close after a
	// message past MaxFrameSize: the server shuts down the connection's
	// write side and reads and discards what the peer still sends, for at
	// most that long and that many bytes, so that the rest of the message,
	// unread, does not reset the connection and destroy the close message
	// that says why (1009). Defaults DefaultLingerTime (2s) and
	// DefaultLingerBytes (4 MiB).
	LingerTime  time.Duration
	LingerBytes int
}

// The defaults of Options.LingerTime and LingerBytes.
const (
	DefaultLingerTime  = linger.DefaultTime
	DefaultLingerBytes = linger.DefaultBytes
)

// Handler returns an http.Handler that upgrades a GET request asking for
// the rpcd subprotocol to a WebSocket connection and has srv serve it,
// one frame a binary message, until it ends. Other requests get 400.
func Handler(srv ConnServer, opts Options) http.Handler {
	if opts.MaxFrameSize <= 0 {
		opts.MaxFrameSize = proto.DefaultMaxFrameSize
	}
	if opts.CheckOrigin == nil {
		opts.CheckOrigin = func(*http.Request) bool { return true }
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.LingerTime <= 0 {
		opts.LingerTime = DefaultLingerTime
	}
	if opts.LingerBytes <= 0 {
		opts.LingerBytes = DefaultLingerBytes
	}
	up := &websocket.Upgrader{
		Subprotocols:    []string{Subprotocol},
		ReadBufferSize:  64 << 10,
		WriteBufferSize: 64 << 10,
		CheckOrigin:     opts.CheckOrigin,
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(websocket.Subprotocols(r), Subprotocol) {
			http.Error(w, "rpcd: a WebSocket to "+r.URL.Path+" carries rpcd frames: ask for the subprotocol "+Subprotocol, http.StatusBadRequest)
			return
		}
		wc, err := up.Upgrade(w, r, nil) // answers the request itself when it fails
		if err != nil {
			opts.Logger.Debug("rpcd: WebSocket upgrade failed", "remote", r.RemoteAddr, "err", err)
			return
		}
		wc.SetReadLimit(int64(opts.MaxFrameSize))
		c := newConn(wc)
		c.lingerTime, c.lingerBytes = opts.LingerTime, opts.LingerBytes
		srv.ServeConn(c)
	})
}

// Dial opens a WebSocket connection to url (ws://host:port/ws, or wss://
// with tlsConfig for the TLS client's settings; nil for the defaults)
// asking for the rpcd subprotocol, and returns it as a net.Conn that
// carries frames: each frame written goes in a binary message of its own,
// and Read returns the bytes of the messages that come. A client.Options
// Dial can return it, so rpcd's client works over WebSocket.
func Dial(ctx context.Context, url string, tlsConfig *tls.Config) (net.Conn, error) {
	d := websocket.Dialer{
		Subprotocols:     []string{Subprotocol},
		TLSClientConfig:  tlsConfig,
		ReadBufferSize:   64 << 10,
		WriteBufferSize:  64 << 10,
		HandshakeTimeout: 10 * time.Second,
	}
	wc, resp, err := d.DialContext(ctx, url, nil)
	if err != nil {
		if resp != nil {
			return nil, errors.New("rpcd: WebSocket to " + url + ": " + resp.Status)
		}
		return nil, err
	}
	if wc.Subprotocol() != Subprotocol {
		wc.Close()
		return nil, errors.New("rpcd: " + url + " did not take the rpcd subprotocol")
	}
	return newConn(wc), nil
}

// Conn is a WebSocket connection as a byte stream of frames. A goroutine
// reads its messages, one at a time, so that a read deadline (which the
// standard library transport moves into the past to interrupt a Read)
// ends a Read without breaking the WebSocket, as it would in the library.
// Writes go straight to the WebSocket, a frame a message.
type Conn struct {
	wc *websocket.Conn

	msgs   chan []byte   // messages read, for Read; closed when the reader stops
	rerr   error         // why the reader stopped; set before msgs closes
	cur    []byte        // what Read has not returned of the current message
	closed chan struct{} // closed by Close: the reader stops
	once   sync.Once

	peerClosed atomic.Bool // the peer's close message came: Read returns io.EOF
	tooLarge   atomic.Bool // a message passed the read limit: the rest of it is unread

	lingerTime  time.Duration // a Handler's Options (Dial sets no read limit: none lingers)
	lingerBytes int

	dmu   sync.Mutex
	rdl   time.Time     // the read deadline
	moved chan struct{} // closed when the read deadline moves

	// Owned by the writer.
	w    io.WriteCloser // the message of the frame being written
	left int            // bytes of that frame still to write
	hdr  [proto.HeaderSize]byte
	nhdr int // bytes of a frame's header that came in a Write too short for it
}

func newConn(wc *websocket.Conn) *Conn {
	c := &Conn{wc: wc, msgs: make(chan []byte, 1), closed: make(chan struct{}), moved: make(chan struct{})}
	go c.readLoop()
	return c
}

// errText is the error of a text message, which carries no frames.
var errText = errors.New("rpcd: a text message on a WebSocket of rpcd frames")

// readLoop reads whole messages until the WebSocket ends or Close.
func (c *Conn) readLoop() {
	defer close(c.msgs)
	for {
		typ, r, err := c.wc.NextReader()
		if err != nil {
			c.tooLarge.Store(errors.Is(err, websocket.ErrReadLimit)) // the library sent close 1009
			if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseNoStatusReceived) {
				c.peerClosed.Store(true)
				err = io.EOF
			}
			c.rerr = err
			return
		}
		if typ != websocket.BinaryMessage {
			_ = c.wc.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseUnsupportedData, "rpcd frames go in binary messages"), time.Now().Add(time.Second))
			c.rerr = errText
			return
		}
		m, err := io.ReadAll(r) // at most the read limit
		if err != nil {
			c.tooLarge.Store(errors.Is(err, websocket.ErrReadLimit)) // a message in fragments
			c.rerr = err
			return
		}
		select {
		case c.msgs <- m:
		case <-c.closed:
			c.rerr = net.ErrClosed
			return
		}
	}
}

// Read implements net.Conn: the bytes of the messages that come, in order.
func (c *Conn) Read(p []byte) (int, error) {
	for len(c.cur) == 0 {
		c.dmu.Lock()
		dl, moved := c.rdl, c.moved
		c.dmu.Unlock()
		var t *time.Timer
		var expired <-chan time.Time
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			t = time.NewTimer(d)
			expired = t.C
		}
		var err error
		select {
		case m, ok := <-c.msgs:
			if ok {
				c.cur = m
			} else {
				err = c.rerr
			}
		case <-expired:
			err = os.ErrDeadlineExceeded
		case <-moved:
		}
		if t != nil {
			t.Stop()
		}
		if err != nil {
			return 0, err
		}
	}
	n := copy(p, c.cur)
	c.cur = c.cur[n:]
	return n, nil
}

// Write implements net.Conn. b holds frames, whole or in part (a large
// reply's header and payload may come in two Writes): each frame goes in a
// binary message of its own.
func (c *Conn) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		if c.w == nil { // a frame begins: its header says how long it is
			k := copy(c.hdr[c.nhdr:], b)
			n, b = n+k, b[k:]
			if c.nhdr += k; c.nhdr < proto.HeaderSize {
				return n, nil
			}
			c.nhdr = 0
			var err error
			if c.w, err = c.wc.NextWriter(websocket.BinaryMessage); err != nil {
				return n, err
			}
			if _, err := c.w.Write(c.hdr[:]); err != nil {
				return n, err
			}
			c.left = proto.FrameLen(c.hdr[:]) - proto.HeaderSize
			if c.hdr[0] != proto.Magic0 || c.hdr[1] != proto.Magic1 || c.left > maxMessage {
				c.left = len(b) // not a frame (a test's garbage): the rest of b in one message
			}
		}
		k := min(len(b), c.left)
		m, err := c.w.Write(b[:k])
		n, b, c.left = n+m, b[m:], c.left-m
		if err != nil {
			return n, err
		}
		if c.left == 0 {
			err, c.w = c.w.Close(), nil // the message goes out
			if err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// maxMessage bounds the frame a Write begins in a message of its own; past
// it, what the header says is not believed.
const maxMessage = 1 << 30

// Close implements net.Conn: a close message, then the end of the
// connection.
func (c *Conn) Close() error {
	err := net.ErrClosed
	c.once.Do(func() {
		close(c.closed)
		_ = c.wc.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		if c.tooLarge.Load() {
			// Closed with the rest of that message unread, the connection
			// would be reset, and the peer would lose the close message
			// that says why (1009).
			linger.Drain(c.wc.NetConn(), c.lingerTime, c.lingerBytes)
		}
		err = c.wc.Close()
	})
	return err
}

// PeerClosed reports whether the peer has closed the WebSocket: its close
// message came, and Read returns io.EOF. A WebSocket has no half-close, so
// a server that sees the end of its input knows from this that no one
// reads what it would still write.
func (c *Conn) PeerClosed() bool { return c.peerClosed.Load() }

// LocalAddr implements net.Conn.
func (c *Conn) LocalAddr() net.Addr { return c.wc.LocalAddr() }

// RemoteAddr implements net.Conn.
func (c *Conn) RemoteAddr() net.Addr { return c.wc.RemoteAddr() }

// SetDeadline implements net.Conn.
func (c *Conn) SetDeadline(t time.Time) error {
	_ = c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

// SetReadDeadline implements net.Conn. A Read that it ends returns
// os.ErrDeadlineExceeded, and the connection goes on.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.dmu.Lock()
	c.rdl = t
	close(c.moved)
	c.moved = make(chan struct{})
	c.dmu.Unlock()
	return nil
}

// SetWriteDeadline implements net.Conn. A write it cuts short leaves the
// WebSocket unusable, as a TLS connection's would be.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.wc.SetWriteDeadline(t) }
