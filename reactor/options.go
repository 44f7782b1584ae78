package reactor

import (
	"context"
	"log/slog"
	"runtime"

	"github.com/rpcd/rpcd/proto"
)

// Options configures a Server. The zero Options is valid: every zero field
// takes the default given in its comment.
type Options struct {
	// Loops is the number of gnet event loops; default runtime.GOMAXPROCS(0).
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

	// BlockingQueue bounds the Blocking calls, server-wide, waiting for a
	// worker; past it, calls get ResourceExhausted. Default 4096.
	BlockingQueue int

	// BaseContext, if set, supplies the values every Call carries.
	BaseContext context.Context

	// Logger receives the server's logs and gnet's; default slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Loops <= 0 {
		o.Loops = runtime.GOMAXPROCS(0)
	}
	o.Limits = o.Limits.WithDefaults()
	if o.MaxInflight <= 0 {
		o.MaxInflight = 256
	}
	if o.BlockingWorkers <= 0 {
		o.BlockingWorkers = 128
	}
	if o.BlockingQueue <= 0 {
		o.BlockingQueue = 4096
	}
	if o.BaseContext == nil {
		o.BaseContext = context.Background()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}
