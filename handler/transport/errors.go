package transport

import (
	"errors"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/handlerstate"
	"github.com/rpcd/rpcd/proto"
)

// Received returns err, the outcome of a call, stream or publish that a
// client or a reactor.Peer made, marked as such; the client and Peer
// return every error so. Its Unprocessed flag still tells the caller that
// its call was not acted on, but a handler that returns it (or wraps it)
// has run, whatever its callee did: the server answers the handler's own
// call without the flag, so that its caller does not send it again. A
// handler that knows it did nothing may return a *handler.Error of its
// own marked Unprocessed. Errors that are not a *handler.Error marked
// Unprocessed come back as they are.
func Received(err error) error {
	e, ok := err.(*handler.Error)
	if !ok || !e.Unprocessed {
		return err
	}
	return markReceived(e) // e itself if it is marked already
}

// AnswersUnprocessed reports whether a handler's error answers its call
// with the Unprocessed flag: a *handler.Error marked Unprocessed that no
// call of the handler's returned (Received).
func AnswersUnprocessed(err error) bool {
	var e *handler.Error
	return errors.As(err, &e) && e.Unprocessed && !isReceived(e)
}

// The flag Received sets, on handler's Error, reached through the
// accessors handler sets in its init: only for an error marked
// Unprocessed.
var (
	isReceived   = handlerstate.IsReceived.(func(*handler.Error) bool)
	markReceived = handlerstate.MarkReceived.(func(*handler.Error) *handler.Error)
)

// CodeSlots is the length of an array that counts by error code (the
// servers' error counters, the metrics by route): a slot for each code
// docs/protocol.md defines (0 to 16), and a last one that counts every code
// above them together (reserved by the protocol, or an application's own).
const CodeSlots = int(proto.CodeUnauthenticated) + 2

// CodeSlot returns the index that counts code in such an array.
func CodeSlot(code proto.Code) int { return min(int(code), CodeSlots-1) }
