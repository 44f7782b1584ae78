package client

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/rpcd/rpcd/proto"
)

// Options configures a Client. The zero Options is valid: every zero field
// takes the default given in its comment.
type Options struct {
	// Conns is the number of connections calls are spread over; default 1.
	Conns int

	// Limits bounds the frames read from the server and the requests sent;
	// default 4 MiB frames, 256-byte routes, 8 KiB metadata.
	Limits proto.Limits

	// DialTimeout bounds each connection attempt; default 5s.
	DialTimeout time.Duration

	// Timeout is the deadline given to calls whose context has none; zero
	// means such calls wait as long as their context lets them.
	Timeout time.Duration

	// MinBackoff and MaxBackoff bound the wait between reconnection
	// attempts, which doubles from the first to the second with jitter;
	// defaults 50ms and 5s.
	MinBackoff, MaxBackoff time.Duration

	// Dial opens connections; default a net.Dialer on "tcp". An address of
	// the form "unix:///path" dials a Unix socket.
	Dial func(ctx context.Context, addr string) (net.Conn, error)

	// Logger receives the client's logs; default slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Conns <= 0 {
		o.Conns = 1
	}
	o.Limits = o.Limits.WithDefaults()
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 50 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Second
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = o.MinBackoff
	}
	if o.Dial == nil {
		o.Dial = dial
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

func dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	if len(addr) > 7 && addr[:7] == "unix://" {
		return d.DialContext(ctx, "unix", addr[7:])
	}
	if len(addr) > 6 && addr[:6] == "tcp://" {
		addr = addr[6:]
	}
	return d.DialContext(ctx, "tcp", addr)
}
