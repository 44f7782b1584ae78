package reactor

import (
	"context"
	"crypto/tls"
	"log/slog"
	"runtime"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/transport"
	"github.com/rpcd/rpcd/internal/optcheck"
	"github.com/rpcd/rpcd/internal/stream"
	"github.com/rpcd/rpcd/proto"
)

// Options configures a Server. The zero Options is valid: every zero field
// takes the default given in its comment (DefaultOptions has them all). A
// negative value turns off what can be turned off, where a field's comment
// says so; elsewhere it is a mistake, which Validate reports and which
// keeps the server from starting.
type Options struct {
	// Loops is the number of gnet event loops; default DefaultLoops(), one
	// fewer than runtime.GOMAXPROCS(0), at least 1.
	//
	// A loop waiting in epoll_wait keeps its P: Go takes a P back from a
	// system call only at sysmon's tick, and from a loop under load, whose
	// waits are short, hardly ever. With a loop on every P, whatever else in
	// the process waits in Go's own network poller (clients, HTTP servers,
	// blocking handlers calling other services) runs only when sysmon polls,
	// every 10 ms; so by default one P is left to it. (With a loop on every
	// P, the server's own accepting waits in poll(2) instead, and needs no P
	// left.) A server
	// with nothing else in its process waiting on the network serves the
	// most calls with a loop per P: `rpcd serve` runs so unless it serves
	// the HTTP gateway. docs/performance.md, "Event loops and Ps", has the
	// figures.
	Loops int

	// Limits bounds every frame read: frame size (default 4 MiB), route
	// length (256 bytes) and metadata (8 KiB). Replies larger than the frame
	// limit become ResourceExhausted errors.
	Limits proto.Limits

	// MaxInflight bounds the calls of one connection that wait for or run
	// on the blocking pool; past it, calls get ResourceExhausted. Default 256.
	MaxInflight int

	// BlockingWorkers is the number of goroutines that run Blocking routes;
	// default 128.
	BlockingWorkers int

	// InlineThreshold is how long an inline handler (one registered
	// without handler.Blocking) may hold its event loop before the
	// watchdog reports it: the run is counted on its route, the route's
	// first such run is logged with the stacks of the goroutines running
	// inline handlers, and the run counts as over budget (InlineBudget).
	// The watchdog looks every InlineThreshold/2, so it reports a handler
	// after between 1 and 1.5 times InlineThreshold, a handler that never
	// returns among them. Default 100ms: far beyond what an inline handler
	// should take (microseconds) and beyond the pauses a busy machine gives
	// a loop, yet well within any caller's deadline; a negative value turns
	// the watchdog off.
	InlineThreshold time.Duration

	// InlineBudget is the time an inline run may take: a route whose timed
	// inline runs (one call in 64 per connection, and every run the
	// watchdog reports) keep taking longer, 8 of its last 16, moves itself
	// to the blocking pool, unless registered with handler.Inline. Default
	// transport.DefaultInlineBudget (1ms); a negative value moves no route.
	InlineBudget time.Duration

	// BlockingQueue bounds the Blocking calls, server-wide, waiting for a
	// worker; past it, calls get ResourceExhausted. Default 4096.
	BlockingQueue int

	// MaxConns bounds the open connections; past it, new ones get a GoAway
	// (ResourceExhausted) and are closed at once. Default 10,000.
	MaxConns int

	// FrameTimeout bounds the time from a frame's first byte to its last:
	// a peer that trickles a frame is cut off. Default 30s.
	FrameTimeout time.Duration

	// IdleTimeout, if set, closes a connection that sends nothing for that
	// long. Default 0: idle connections stay while they answer pings.
	IdleTimeout time.Duration

	// KeepAlive is how long a connection may send nothing before the
	// server pings it; a ping unanswered within KeepAliveTimeout closes
	// it, so a peer gone without a FIN is found. Defaults 30s and 10s; a
	// negative KeepAlive sends no pings.
	KeepAlive, KeepAliveTimeout time.Duration

	// MaxOutbound is the high-water mark of a connection's unsent output:
	// a wake-up that has made this much writes it before it runs more
	// frames, and a connection whose socket does not take its output
	// reads and runs nothing more until the peer has read it, so that TCP
	// holds the peer back. The frames the server sends on its own
	// (Peer.Notify and Call, Broadcast, stream data) are refused past it.
	// Default 8 MiB.
	MaxOutbound int

	// WriteTimeout cuts off a connection whose peer takes none of its
	// output for that long, and bounds how long a connection whose peer
	// has shut down its side (a FIN) waits for its calls and streams to
	// finish. Default 30s.
	WriteTimeout time.Duration

	// MaxConnAge, if set, bounds how long a connection is served: once it
	// is that old, give or take up to a tenth at random (so that
	// connections opened together do not end together), it gets a GoAway,
	// as every connection does on a drain: its calls in flight are
	// answered, later ones refused (Unavailable, Unprocessed), and a client
	// dials a new connection, which a balancer in front of several servers
	// may send to another. Clients that dialled one address behind an L4
	// balancer so spread over servers added since. Default 0: a connection
	// lasts as long as its peer keeps it (a negative value too).
	MaxConnAge time.Duration

	// MaxConnAgeGrace is how long a connection that got its GoAway for
	// MaxConnAge has to finish its calls and streams before it is closed
	// with whatever it still has running. Default DefaultMaxConnAgeGrace
	// (30s); a negative value never closes it: its peer does.
	MaxConnAgeGrace time.Duration

	// Authenticator, if set, makes every connection authenticate with a
	// Hello before anything else (docs/protocol.md, "The handshake"); the
	// Identity it returns goes with every call of the connection. It runs
	// on the event loop and must not block.
	Authenticator handler.Authenticator

	// HandshakeTimeout is how long a connection has to authenticate, and
	// PreAuthMaxFrame the largest frame payload before it has. Defaults 5s
	// and 4 KiB.
	HandshakeTimeout time.Duration
	PreAuthMaxFrame  int

	// TLS, if set, serves TLS with this configuration (mutual TLS when it
	// asks for client certificates) on the standard library transport, a
	// goroutine per connection, instead of on event loops. A verified client
	// certificate gives the connection an Identity (its subject's common
	// name, its organizational units as roles) unless an Authenticator
	// decides.
	TLS *tls.Config

	// StdTransport serves every connection on the standard library
	// transport, a goroutine per connection reading and writing a net.Conn
	// (std.go), instead of on gnet's event loops: the same protocol, limits
	// and shutdown, at the cost of a goroutine and a 64 KiB input buffer per
	// connection and a goroutine's wake-up per read. It is always set on
	// Windows, where gnet's engine is for development only. On Linux (epoll
	// loops), macOS and FreeBSD (kqueue loops) it is off by default: the
	// loops are what docs/performance.md measures ("Other systems" says
	// what each system gets). Server.Transport says which transport a
	// server runs on.
	StdTransport bool

	// Topics, if set, decides where each connection may publish and
	// subscribe (auth.Topics builds one from rules by role): a Subscribe
	// it refuses is answered with an Unsubscribe, and a Publish it refuses
	// with an Error of call id 0, both PermissionDenied (Unauthenticated
	// for a connection without an identity), and counted
	// (PubSubStats.Refused); nothing is delivered. The server's own
	// Publish and Broadcast are not checked. Without it, every connection
	// may publish and subscribe anywhere, at the cost of one nil check.
	Topics handler.TopicPolicy

	// MaxSubscriptions bounds the subscriptions of one connection; past
	// it, a Subscribe is refused (ResourceExhausted). Default 1024.
	MaxSubscriptions int

	// SubscriberQueue bounds the bytes of messages and other output a
	// subscriber may have waiting, unwritten or unread, before
	// SlowSubscriber applies to the next message. Default 1 MiB.
	SubscriberQueue int

	// SlowSubscriber is what happens past SubscriberQueue: DropMessages
	// (the default) or CutOff.
	SlowSubscriber SlowPolicy

	// StreamWindow is the window the server grants each stream, in each
	// of its streams' directions: the most it buffers unread per stream.
	// Default 256 KiB.
	StreamWindow int
	// MaxStreams bounds the streams open on one connection, counted apart
	// for those the client opens (past it, StreamReset ResourceExhausted)
	// and those the server opens. Default 128.
	MaxStreams int

	// CompressMin is the smallest reply payload, in bytes, the server
	// compresses, for a client whose Hello said it takes a compression
	// the server does (zstd or gzip: docs/protocol.md, "Compression");
	// default 1 KiB. A negative value turns compression off: the server's
	// Welcome names none, so clients send nothing compressed, and it
	// compresses no reply (it still expands a compressed call).
	CompressMin int

	// Codec encodes the arguments of a Peer's Call and Notify (the
	// server's calls and pushes to a client: docs/two-way.md) and decodes
	// Call's replies; default handler.JSON. A codec of the application's
	// own (ids proto.CodecUser to 0xFF) must be registered with
	// handler.RegisterCodec in the client's process too, for its typed
	// handlers to take it, as client.Options.Codec is on the server.
	Codec handler.Codec

	// BaseContext, if set, supplies the values every Call carries.
	BaseContext context.Context

	// Logger receives the server's logs and gnet's; default slog.Default().
	Logger *slog.Logger

	// LingerTime and LingerBytes bound the lingering close of a connection
	// that ends on a GoAway: it shuts down its write side and reads and
	// discards what its peer still sends, until the peer closes, for at
	// most that long and that many bytes, so that closing with bytes
	// unread does not reset the connection and destroy the GoAway.
	// Defaults DefaultLingerTime (2s) and DefaultLingerBytes (4 MiB).
	LingerTime  time.Duration
	LingerBytes int

	// RefuseLinger is how long a connection refused at once (past
	// MaxConns, while draining) lingers after its GoAway, each on a
	// goroutine of its own, and MaxRefuseLinger how many may linger at a
	// time: past it, one is closed at once. Defaults DefaultRefuseLinger
	// (250ms) and DefaultMaxRefuseLinger (1024).
	RefuseLinger    time.Duration
	MaxRefuseLinger int
}

// DefaultLoops is the number of event loops a Server runs when
// Options.Loops is 0: one fewer than runtime.GOMAXPROCS(0), at least 1.
func DefaultLoops() int { return max(1, runtime.GOMAXPROCS(0)-1) }

// DefaultOptions returns the Options a zero Options stands for: every
// field that has a default set to it (Loops to DefaultLoops() now).
func DefaultOptions() Options {
	return Options{
		Loops:            DefaultLoops(),
		Limits:           proto.Limits{}.WithDefaults(),
		MaxInflight:      256,
		BlockingWorkers:  128,
		BlockingQueue:    4096,
		InlineThreshold:  100 * time.Millisecond,
		InlineBudget:     transport.DefaultInlineBudget,
		MaxConns:         10000,
		FrameTimeout:     30 * time.Second,
		KeepAlive:        proto.DefaultKeepAlive,
		KeepAliveTimeout: proto.DefaultKeepAliveTimeout,
		MaxOutbound:      8 << 20,
		WriteTimeout:     30 * time.Second,
		MaxConnAgeGrace:  DefaultMaxConnAgeGrace,
		HandshakeTimeout: 5 * time.Second,
		PreAuthMaxFrame:  4 << 10,
		MaxSubscriptions: 1024,
		SubscriberQueue:  1 << 20,
		SlowSubscriber:   DropMessages,
		StreamWindow:     stream.DefaultWindow,
		MaxStreams:       128,
		CompressMin:      proto.DefaultCompressMin,
		Codec:            handler.JSON,
		BaseContext:      context.Background(),
		Logger:           slog.Default(),
		LingerTime:       DefaultLingerTime,
		LingerBytes:      DefaultLingerBytes,
		RefuseLinger:     DefaultRefuseLinger,
		MaxRefuseLinger:  DefaultMaxRefuseLinger,
	}
}

// withDefaults returns o with each zero field set to DefaultOptions'.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if runtime.GOOS == "windows" {
		o.StdTransport = true // gnet's Windows engine is for development only
	}
	o.Limits = o.Limits.WithDefaults()
	optcheck.SetZero(&o.Loops, d.Loops)
	optcheck.SetZero(&o.MaxInflight, d.MaxInflight)
	optcheck.SetZero(&o.BlockingWorkers, d.BlockingWorkers)
	optcheck.SetZero(&o.BlockingQueue, d.BlockingQueue)
	optcheck.SetZero(&o.InlineThreshold, d.InlineThreshold)
	optcheck.SetZero(&o.InlineBudget, d.InlineBudget)
	optcheck.SetZero(&o.MaxConns, d.MaxConns)
	optcheck.SetZero(&o.FrameTimeout, d.FrameTimeout)
	optcheck.SetZero(&o.KeepAlive, d.KeepAlive)
	optcheck.SetZero(&o.KeepAliveTimeout, d.KeepAliveTimeout)
	optcheck.SetZero(&o.MaxOutbound, d.MaxOutbound)
	optcheck.SetZero(&o.WriteTimeout, d.WriteTimeout)
	optcheck.SetZero(&o.MaxConnAgeGrace, d.MaxConnAgeGrace)
	optcheck.SetZero(&o.HandshakeTimeout, d.HandshakeTimeout)
	optcheck.SetZero(&o.PreAuthMaxFrame, d.PreAuthMaxFrame)
	optcheck.SetZero(&o.MaxSubscriptions, d.MaxSubscriptions)
	optcheck.SetZero(&o.SubscriberQueue, d.SubscriberQueue)
	optcheck.SetZero(&o.StreamWindow, d.StreamWindow)
	o.StreamWindow = min(o.StreamWindow, proto.MaxStreamWindow)
	optcheck.SetZero(&o.MaxStreams, d.MaxStreams)
	optcheck.SetZero(&o.CompressMin, d.CompressMin)
	if o.Codec == nil {
		o.Codec = d.Codec
	}
	if o.BaseContext == nil {
		o.BaseContext = d.BaseContext
	}
	if o.Logger == nil {
		o.Logger = d.Logger
	}
	optcheck.SetZero(&o.LingerTime, d.LingerTime)
	optcheck.SetZero(&o.LingerBytes, d.LingerBytes)
	optcheck.SetZero(&o.RefuseLinger, d.RefuseLinger)
	optcheck.SetZero(&o.MaxRefuseLinger, d.MaxRefuseLinger)
	return o
}

// OptionError is a field of Options that Validate refuses.
type OptionError = optcheck.Error

// Validate reports every field of o that the server cannot take, each an
// *OptionError, joined (errors.Join); nil if there is none. Start and Serve
// refuse Options it refuses.
func (o *Options) Validate() error {
	c := optcheck.New("reactor")
	c.Limits(o.Limits)
	for _, f := range []struct {
		name string
		v    int
	}{
		{"Loops", o.Loops}, {"MaxInflight", o.MaxInflight}, {"BlockingWorkers", o.BlockingWorkers},
		{"BlockingQueue", o.BlockingQueue}, {"MaxConns", o.MaxConns}, {"MaxOutbound", o.MaxOutbound},
		{"PreAuthMaxFrame", o.PreAuthMaxFrame}, {"MaxSubscriptions", o.MaxSubscriptions},
		{"SubscriberQueue", o.SubscriberQueue}, {"StreamWindow", o.StreamWindow}, {"MaxStreams", o.MaxStreams},
		{"LingerBytes", o.LingerBytes}, {"MaxRefuseLinger", o.MaxRefuseLinger},
	} {
		optcheck.NotNegative(c, f.name, f.v)
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"FrameTimeout", o.FrameTimeout}, {"KeepAliveTimeout", o.KeepAliveTimeout}, {"WriteTimeout", o.WriteTimeout},
		{"HandshakeTimeout", o.HandshakeTimeout}, {"LingerTime", o.LingerTime}, {"RefuseLinger", o.RefuseLinger},
	} {
		optcheck.NotNegative(c, f.name, f.v)
	}
	if o.SlowSubscriber != DropMessages && o.SlowSubscriber != CutOff {
		c.Add("SlowSubscriber", o.SlowSubscriber, "DropMessages or CutOff")
	}
	return c.Err()
}

// sweepEvery is how often the sweeper looks at the connections: a quarter
// of the shortest timed limit, between 10ms and 1s.
func (o *Options) sweepEvery() time.Duration {
	d := min(o.FrameTimeout, o.KeepAliveTimeout, o.WriteTimeout, o.HandshakeTimeout)
	if o.KeepAlive > 0 {
		d = min(d, o.KeepAlive)
	}
	if o.IdleTimeout > 0 {
		d = min(d, o.IdleTimeout)
	}
	if o.MaxConnAge > 0 {
		d = min(d, o.MaxConnAge)
		if o.MaxConnAgeGrace > 0 {
			d = min(d, o.MaxConnAgeGrace)
		}
	}
	return min(max(d/4, 10*time.Millisecond), time.Second)
}
