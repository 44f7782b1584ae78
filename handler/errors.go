package handler

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rpcd/rpcd/proto"
)

// Error is an error with a code that travels on the wire. Handlers return one
// to choose the code their caller sees; clients return one for every failed
// call. Match it with errors.Is against the sentinels below (which compare
// codes only) or with errors.As to read the code and message.
type Error struct {
	Code    proto.Code
	Message string
	// Unprocessed reports that the call was not acted on (the Unprocessed
	// flag on the wire), so it is safe to send again. The server sets it
	// when it refuses a call; a handler sets it on an error it returns
	// before doing anything. On an error that a call of the handler's own
	// returned (a client's or a Peer's, which mark their errors so: see
	// transport.Received) it speaks of that call: the server answers the
	// handler's call without it.
	Unprocessed bool

	received bool // returned by a call or stream that a client or a Peer made (transport.Received)
}

// Errorf returns an *Error with the code and a formatted message.
func Errorf(code proto.Code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Error returns "rpcd: CODE: MESSAGE". A message that begins "rpcd: "
// itself (another error's text, or a peer's) is written without it, so
// that the prefix comes once.
func (e *Error) Error() string {
	if e.Message == "" {
		return "rpcd: " + e.Code.String()
	}
	return "rpcd: " + e.Code.String() + ": " + strings.TrimPrefix(e.Message, "rpcd: ")
}

// Is reports whether target is an *Error with the same code and no message
// (the sentinels), or the context error that the code stands for, so that
// errors.Is(err, context.DeadlineExceeded) holds for a call whose deadline
// passed on either side.
func (e *Error) Is(target error) bool {
	switch target {
	case context.DeadlineExceeded:
		return e.Code == proto.CodeDeadlineExceeded
	case context.Canceled:
		return e.Code == proto.CodeCanceled
	}
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Code == e.Code
}

// Sentinels to match with errors.Is, one per code.
var (
	ErrCanceled           = &Error{Code: proto.CodeCanceled}
	ErrUnknown            = &Error{Code: proto.CodeUnknown}
	ErrInvalidArgument    = &Error{Code: proto.CodeInvalidArgument}
	ErrDeadlineExceeded   = &Error{Code: proto.CodeDeadlineExceeded}
	ErrNotFound           = &Error{Code: proto.CodeNotFound}
	ErrAlreadyExists      = &Error{Code: proto.CodeAlreadyExists}
	ErrPermissionDenied   = &Error{Code: proto.CodePermissionDenied}
	ErrResourceExhausted  = &Error{Code: proto.CodeResourceExhausted}
	ErrFailedPrecondition = &Error{Code: proto.CodeFailedPrecondition}
	ErrAborted            = &Error{Code: proto.CodeAborted}
	ErrOutOfRange         = &Error{Code: proto.CodeOutOfRange}
	ErrUnimplemented      = &Error{Code: proto.CodeUnimplemented}
	ErrInternal           = &Error{Code: proto.CodeInternal}
	ErrUnavailable        = &Error{Code: proto.CodeUnavailable}
	ErrDataLoss           = &Error{Code: proto.CodeDataLoss}
	ErrUnauthenticated    = &Error{Code: proto.CodeUnauthenticated}
)

// CodeOf returns the wire code for err: the code of an *Error in its chain,
// DeadlineExceeded or Canceled for the context errors, OK for nil and Unknown
// for anything else.
func CodeOf(err error) proto.Code {
	if err == nil {
		return proto.CodeOK
	}
	var e *Error
	switch {
	case errors.As(err, &e):
		return e.Code
	case errors.Is(err, context.DeadlineExceeded):
		return proto.CodeDeadlineExceeded
	case errors.Is(err, context.Canceled):
		return proto.CodeCanceled
	}
	return proto.CodeUnknown
}

// MessageOf returns the message to send on the wire for err: an *Error's own
// message, without the "rpcd: code:" prefix, or err.Error() for other errors,
// without the "rpcd: " that begins an rpcd error's text (the receiver's
// Error adds its own).
func MessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return strings.TrimPrefix(e.Message, "rpcd: ")
	}
	return strings.TrimPrefix(err.Error(), "rpcd: ")
}

// PanicError is the error of a handler that panicked. It goes on the wire
// as an Internal error naming the route and the panic's value; the stack
// stays with the server, for its log.
type PanicError struct {
	Route string
	Value any    // what the handler panicked with
	Stack []byte // the handler goroutine's stack at the panic
}

func (e *PanicError) Error() string { return e.Unwrap().Error() }

// Unwrap returns the Internal *Error that CodeOf and MessageOf read.
func (e *PanicError) Unwrap() error {
	return Errorf(proto.CodeInternal, "handler for %s panicked: %v", e.Route, e.Value)
}

// IsUnprocessed reports whether err is an *Error marked Unprocessed.
func IsUnprocessed(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Unprocessed
}
