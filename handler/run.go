package handler

import (
	"errors"
	"log/slog"
	"math"

	"github.com/rpcd/rpcd/proto"
)

// A call's lifecycle, once a transport has found its route and set up its
// Call, is run here whatever carries it: the reactor's event loop, its
// blocking pool and its streams, the HTTP gateway, and a client serving
// its server's calls and streams. The handler runs under the registry's
// middleware; a panic becomes an Internal error and is logged with its
// stack; a reply is held to the frame limit; and a failure becomes an
// Error frame (or, for the gateway, an error to answer with) and is
// counted.

// Runner runs calls for a transport. A transport makes one, sets its
// fields once, and hands it every call; it is safe for concurrent use.
// The zero Runner runs calls under the defaults.
type Runner struct {
	// MaxFrame is the frame limit replies are held to: a reply whose
	// frame would be larger fails with ResourceExhausted. Default
	// proto.DefaultMaxFrameSize.
	MaxFrame int

	// Logger receives a handler's panic (with its stack) and a one-way
	// call's failure (at Debug). Default slog.Default().
	Logger *slog.Logger

	// Failed, if set, is told the error of every call answered with an
	// Error: a handler's, a panic's, a reply over the frame limit, a Job's
	// Err. The reactor counts them by code.
	Failed func(err error)

	// Compress, if set, compresses the reply of a Job whose Zip is not
	// CompressionNone: the payload of the Response begun at out[start:],
	// with own after it (see Run), returning out and what is left of own.
	// It is asked before the reply is held to the frame limit.
	Compress func(out []byte, start int, own []byte, zip proto.Compression) ([]byte, []byte)
}

// Job is one call for Runner.Run: its route, the Call its handler runs
// under, set up and started by the transport (Call.Start), and the request
// payload. The transport ends the Call (Call.End) once Run has returned.
type Job struct {
	Route  *Route
	Call   *Call
	Req    []byte
	OneWay bool              // no reply goes back: a failure is only logged, at Debug
	Zip    proto.Compression // the reply's compression, through Runner.Compress; CompressionNone for none
	Large  int               // a reply of Large bytes or more that the handler did not append in place comes back as own (Route.ServeOwn); 0 for never
	Err    error             // if set, the call is answered with Err and its handler is not run
}

// Run runs j and appends what answers it to out: a Response, or an Error
// (its code from CodeOf, flagged Unprocessed when IsUnprocessed holds),
// or nothing for a one-way call. A reply of j.Large bytes or more that the
// handler did not append in place comes back as own, to be written right
// after out: the Response's length counts it.
func (r *Runner) Run(j *Job, out []byte) (_, own []byte) {
	call := j.Call
	out, start := proto.BeginResponse(out, call.ID, call.Codec)
	large := j.Large
	if large <= 0 {
		large = math.MaxInt
	}
	err := j.Err
	switch {
	case err != nil:
	default:
		out, own, err = j.Route.ServeOwn(call, j.Req, out, large)
	}
	if j.OneWay {
		if err != nil {
			r.logFailure(call, err, true)
		}
		return out[:start], nil
	}
	if err == nil {
		if j.Zip != proto.CompressionNone && r.Compress != nil {
			out, own = r.Compress(out, start, own, j.Zip)
		}
		n := proto.FinishFrameWith(out, start, len(own))
		if n <= r.maxFrame() {
			return out, own
		}
		err = r.tooLarge(n)
	}
	r.logFailure(call, err, false)
	if r.Failed != nil {
		r.Failed(err)
	}
	var flags proto.Flags
	if IsUnprocessed(err) {
		flags = proto.FlagUnprocessed
	}
	return proto.AppendError(out[:start], call.ID, flags, CodeOf(err), MessageOf(err)), nil
}

// Outcome runs a call whose answer is not a frame, the HTTP gateway's: it
// appends the reply payload to out and returns it, or the error to answer
// with instead, as Run would put it in an Error frame: the handler's, an
// Internal error for a panic (logged with its stack), or ResourceExhausted
// for a reply whose frame would pass MaxFrame.
func (r *Runner) Outcome(rt *Route, call *Call, req, out []byte) ([]byte, error) {
	out, err := rt.Serve(call, req, out)
	if err == nil {
		if n := proto.HeaderSize + len(out); n > r.maxFrame() { // a Response has no route or metadata
			err = r.tooLarge(n)
		}
	}
	if err != nil {
		r.logFailure(call, err, false)
		if r.Failed != nil {
			r.Failed(err)
		}
	}
	return out, err
}

// Stream runs a stream route's handler under call (its parent from
// WithStream) and returns its outcome, for the transport to finish the
// stream with: the handler's error, or an Internal error for a panic,
// logged with its stack. A failure is counted by Failed.
func (r *Runner) Stream(rt *StreamRoute, call *Call) error {
	err := rt.ServeStream(call)
	if err != nil {
		r.logFailure(call, err, false)
		if r.Failed != nil {
			r.Failed(err)
		}
	}
	return err
}

func (r *Runner) maxFrame() int {
	if r.MaxFrame <= 0 {
		return proto.DefaultMaxFrameSize
	}
	return r.MaxFrame
}

func (r *Runner) log() *slog.Logger {
	if r.Logger == nil {
		return slog.Default()
	}
	return r.Logger
}

// tooLarge is the error of a reply whose frame has n bytes, over the limit.
func (r *Runner) tooLarge(n int) error {
	return Errorf(proto.CodeResourceExhausted, "reply of %d bytes exceeds the frame limit of %d", n, r.maxFrame())
}

// logFailure logs a handler's panic with its stack, and a one-way call's
// failure at Debug, as nobody else hears of it.
func (r *Runner) logFailure(call *Call, err error, oneWay bool) {
	var pe *PanicError
	switch {
	case errors.As(err, &pe):
		r.log().Error("rpcd: handler panicked", "route", pe.Route, "remote", call.Remote, "panic", pe.Value, "stack", string(pe.Stack))
	case oneWay:
		r.log().Debug("rpcd: one-way call failed", "route", call.Route, "remote", call.Remote, "err", err)
	}
}
