package client

import (
	"context"
	"crypto/tls"
	"log/slog"
	"math"
	"net"
	"slices"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/internal/optcheck"
	"github.com/rpcd/rpcd/internal/stream"
	"github.com/rpcd/rpcd/proto"
)

// Options configures a Client. The zero Options is valid: every zero field
// takes the default given in its comment (DefaultOptions has them all). A
// negative value turns off what can be turned off, where a field's comment
// says so; elsewhere it is a mistake, which Validate reports and Dial
// refuses.
type Options struct {
	// Conns is the number of connections calls are spread over; default 1.
	Conns int

	// EventLoops has the client's connections read by the process's
	// event loops, an epoll instance per P shared by every client that
	// sets it, instead of by a goroutine each: a reply wakes no goroutine
	// of its own, and an asynchronous call's done function runs on the
	// loop. For a program that holds thousands of connections each with a
	// call or two in flight (a load generator, a gateway's fan-out);
	// docs/performance.md has the figures. A sequential Call on such a
	// connection does not read its own reply: it waits for the loop to
	// deliver it, a goroutine wake-up per call, where without EventLoops a
	// lone caller reads for itself. A loop is shared by the connections of
	// many clients: a done function that blocks stalls them all, and one
	// must not close a client (Close waits for the loops to let go of its
	// connections). Linux, over TCP or Unix sockets without TLS; elsewhere
	// it is ignored.
	EventLoops bool

	// Limits bounds the frames read from the server and the requests sent;
	// default 4 MiB frames, 256-byte routes, 8 KiB metadata.
	Limits proto.Limits

	// DialTimeout bounds each connection attempt; default 5s.
	DialTimeout time.Duration

	// ProbeTimeout, if set, has every connection show that its peer is an
	// rpcd server before it carries a call: the client sends a Ping (after
	// TLS, before any Hello) and waits up to ProbeTimeout for the Pong. A
	// peer that answers with other bytes, closes the connection or says
	// nothing in time fails the dial with an Unavailable error that says
	// which ("127.0.0.1:8080 answered with bytes that are not rpcd frames
	// (HTTP?)"), rather than leaving calls to wait for their deadline. It
	// costs a round trip per connection; zero (the default) or a negative
	// value sends no Ping.
	ProbeTimeout time.Duration

	// Timeout is the deadline given to calls whose context has none; zero
	// (the default) or a negative value means such calls wait as long as
	// their context lets them. With a
	// context that never ends (context.Background), the deadline of a
	// Client's or a Cluster's call costs no context and timer per call: a
	// caller waiting behind another reader of its connection sees it pass
	// within 10 ms (timeout.go). Futures (Go, GoRaw) still make a context
	// with a timeout.
	Timeout time.Duration

	// MinBackoff and MaxBackoff bound the wait between reconnection
	// attempts, which doubles from the first to the second with jitter;
	// defaults 50ms and 5s. A call's retries wait on the same scale.
	MinBackoff, MaxBackoff time.Duration

	// MaxRetries bounds how many times a failed call is sent again: zero
	// means the default, 2, and a negative value disables retries. Only
	// calls that provably did not run are sent again: those that fail with
	// Unavailable or ResourceExhausted and the Unprocessed flag (refused by
	// a draining or overloaded server, never written, or cut off by a
	// GoAway that excluded them), plus, for Idempotent routes, those that
	// fail with Unavailable whatever their fate. Each retry waits a random
	// time between half and all of MinBackoff doubled once per retry before
	// it (capped at MaxBackoff), never past the call's context. One-way
	// calls are never sent again. docs/reliability.md has the rules.
	MaxRetries int

	// Idempotent reports whether running route more than once does no
	// harm. Calls to such routes are also sent again after an Unavailable
	// error whose fate is unknown (the connection was lost while the call
	// was out). Nil means no route is; RouteSet builds one from a list. It
	// is called only when a call fails, from any goroutine, and must not
	// block.
	Idempotent func(route string) bool

	// WaitForReady makes a call that finds no usable connection wait for
	// one, for as long as its context lets it, before it is sent; the wait
	// does not count as a retry. By default such a call fails with
	// Unavailable and Unprocessed, which is retried like any such error: it
	// is sent if a connection is back within its retries' backoff.
	WaitForReady bool

	// KeepAlive is how long a connection may read nothing before the
	// client sends it a Ping (the watch looks every quarter of it, so the
	// Ping goes out up to a quarter later); default 30s, and a negative
	// value sends none.
	KeepAlive time.Duration

	// KeepAliveTimeout is how long the client waits, after a keep-alive
	// Ping, for any frame at all before it fails the connection: its calls
	// fail with Unavailable and the connection is redialled. Default 10s.
	KeepAliveTimeout time.Duration

	// Dial opens connections; default a net.Dialer on "tcp". An address of
	// the form "unix:///path" dials a Unix socket.
	Dial func(ctx context.Context, addr string) (net.Conn, error)

	// TLS, if set, runs TLS over every connection Dial makes, before the
	// handshake; a client certificate for mutual TLS goes in its
	// Certificates. If its ServerName is empty, the host of the address is
	// used (nothing for a Unix socket: set it, or InsecureSkipVerify).
	TLS *tls.Config

	// Credentials, if set, are sent in a Hello on every connection before
	// any call, for a server that requires authentication; a connection
	// whose Hello is refused is not used (Dial fails with Unauthenticated).
	// Over TLS, a client certificate in Options.TLS can serve instead.
	Credentials *Credentials

	// Handler, if set, holds the routes the server may call on this
	// client (reverse calls, and one-way pushes), registered as on a
	// server. Each call runs on a goroutine of its own, under a
	// handler.Call whose Peer is this Client, so a handler may call the
	// server back and wait. Without a route for it, a server's call gets
	// NotFound.
	Handler *handler.Registry

	// Pushes, if set, receives the one-way messages the server sends to
	// routes Handler has none for. The client never waits for room: a
	// message that does not fit is dropped and counted (DroppedPushes).
	Pushes chan<- Push

	// PublishRefused, if set, is called with each refusal of a publish of
	// this client's by the server (a server with topic permissions: an
	// Error of call id 0, docs/protocol.md, "Publish and subscribe"): a
	// *handler.Error, PermissionDenied or Unauthenticated, whose message
	// names the topic. It is called on the goroutine that reads the
	// connection and must not block. Refusals are counted either way
	// (RefusedPublishes); Flush waits until those of the publishes before
	// it have arrived.
	PublishRefused func(err error)

	// MaxHandlers bounds the server's calls running at once on one
	// connection; past it they get ResourceExhausted. Default 256.
	MaxHandlers int

	// Codec encodes the arguments of Call, Go, Notify and Publish and
	// decodes Call's and Go's replies; default handler.JSON. Another codec
	// (its id proto.CodecUser to 0xFF) must be registered on the server
	// with handler.RegisterCodec, under the same id, for its typed routes
	// to take it. Raw calls are raw whatever it is.
	Codec handler.Codec

	// Compression, if set (proto.CompressionZstd or CompressionGzip),
	// compresses the payloads of calls of CompressMin bytes or more, and
	// asks the server to compress its replies, on every connection whose
	// server takes it: the client names it in a Hello, and the server's
	// Welcome says whether it does (docs/protocol.md, "Compression"). A
	// server that does not takes every call as it would without it.
	Compression proto.Compression

	// CompressMin is the smallest payload Compression compresses, in
	// bytes; default 1 KiB. A payload that does not shrink goes as it is.
	// A negative value compresses no payload the client sends, while the
	// server is still asked to compress its replies.
	CompressMin int

	// Interceptors wrap every call the client sends, the first outermost
	// (Interceptor).
	Interceptors []Interceptor

	// StreamWindow is the window the client grants each stream, in each
	// direction it receives: the most it buffers unread per stream.
	// Default 256 KiB.
	StreamWindow int

	// Logger receives the client's logs; default slog.Default().
	Logger *slog.Logger
}

// Credentials are what a client presents in its Hello.
type Credentials struct {
	// Method names the kind of secret: "token" (a token from the server's
	// list) or "hmac" (a token signed by `rpcd token`); empty lets the
	// server try what it has.
	Method string
	Secret []byte
}

// DefaultOptions returns the Options a zero Options stands for: every
// field that has a default set to it.
func DefaultOptions() Options {
	return Options{
		Conns:            1,
		Limits:           proto.Limits{}.WithDefaults(),
		DialTimeout:      5 * time.Second,
		MinBackoff:       50 * time.Millisecond,
		MaxBackoff:       5 * time.Second,
		MaxRetries:       2,
		KeepAlive:        proto.DefaultKeepAlive,
		KeepAliveTimeout: proto.DefaultKeepAliveTimeout,
		Dial:             dial,
		MaxHandlers:      256,
		Codec:            handler.JSON,
		CompressMin:      proto.DefaultCompressMin,
		StreamWindow:     stream.DefaultWindow,
		Logger:           slog.Default(),
	}
}

// withDefaults returns o with each zero field set to DefaultOptions', and
// a negative CompressMin made one no payload reaches.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	o.Limits = o.Limits.WithDefaults()
	optcheck.SetZero(&o.Conns, d.Conns)
	optcheck.SetZero(&o.DialTimeout, d.DialTimeout)
	optcheck.SetZero(&o.MinBackoff, d.MinBackoff)
	optcheck.SetZero(&o.MaxBackoff, d.MaxBackoff)
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = o.MinBackoff
	}
	optcheck.SetZero(&o.MaxRetries, d.MaxRetries)
	optcheck.SetZero(&o.KeepAlive, d.KeepAlive)
	optcheck.SetZero(&o.KeepAliveTimeout, d.KeepAliveTimeout)
	if o.Dial == nil {
		o.Dial = d.Dial
	}
	optcheck.SetZero(&o.MaxHandlers, d.MaxHandlers)
	optcheck.SetZero(&o.StreamWindow, d.StreamWindow)
	o.StreamWindow = min(o.StreamWindow, proto.MaxStreamWindow)
	if o.Logger == nil {
		o.Logger = d.Logger
	}
	if o.Codec == nil {
		o.Codec = d.Codec
	}
	optcheck.SetZero(&o.CompressMin, d.CompressMin)
	if o.CompressMin < 0 {
		o.CompressMin = math.MaxInt // off
	}
	return o
}

// OptionError is a field of Options that Validate refuses.
type OptionError = optcheck.Error

// Validate reports every field of o that a client cannot take, each an
// *OptionError, joined (errors.Join); nil if there is none. Dial refuses
// Options it refuses.
func (o *Options) Validate() error {
	c := optcheck.New("client")
	c.Limits(o.Limits)
	for _, f := range []struct {
		name string
		v    int
	}{
		{"Conns", o.Conns}, {"MaxHandlers", o.MaxHandlers}, {"StreamWindow", o.StreamWindow},
	} {
		optcheck.NotNegative(c, f.name, f.v)
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"DialTimeout", o.DialTimeout}, {"MinBackoff", o.MinBackoff}, {"MaxBackoff", o.MaxBackoff},
		{"KeepAliveTimeout", o.KeepAliveTimeout},
	} {
		optcheck.NotNegative(c, f.name, f.v)
	}
	if o.Codec != nil {
		c.Join(checkCodec(o.Codec))
	}
	c.Join(checkCompression(o.Compression))
	return c.Err()
}

// checkCompression refuses a compression the client cannot do.
func checkCompression(c proto.Compression) error {
	if c != proto.CompressionNone && !slices.Contains(compression.Supported(), c) {
		return &OptionError{Pkg: "client", Field: "Compression", Value: c, Want: "zstd or gzip"}
	}
	return nil
}

// takes returns the compressions the client names in its Hello: o's
// first, then the others it does; none if o has none.
func (o *Options) takes() []proto.Compression {
	if o.Compression == proto.CompressionNone {
		return nil
	}
	cs := []proto.Compression{o.Compression}
	for _, c := range compression.Supported() {
		if c != o.Compression {
			cs = append(cs, c)
		}
	}
	return cs
}

// checkCodec refuses a codec whose id no server's typed routes can take.
func checkCodec(c handler.Codec) error {
	if id := c.ID(); id != proto.CodecJSON && id < proto.CodecUser {
		return &OptionError{Pkg: "client", Field: "Codec", Value: id, Want: "json or an application's (0x80 to 0xff)"}
	}
	return nil
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

// RouteSet returns a function, for Options.Idempotent, that reports whether
// a route is one of routes.
func RouteSet(routes ...string) func(route string) bool {
	set := make(map[string]struct{}, len(routes))
	for _, r := range routes {
		set[r] = struct{}{}
	}
	return func(route string) bool {
		_, ok := set[route]
		return ok
	}
}
