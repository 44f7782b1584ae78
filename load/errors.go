package load

import (
	"errors"
	"strings"
)

// ErrWrongReply is what a Call returns, wrapped, for a reply that arrived
// but is not the one expected (an echo that differs, a sum that is
// wrong). Reports count such calls as "wrong reply".
var ErrWrongReply = errors.New("rpcd: wrong reply")

// errorIn returns err with what it happened in before its message, as
// "rpcd: WHAT: MESSAGE", the prefix once however err begins; errors.Is and
// errors.As see err.
func errorIn(what string, err error) error { return &inError{what, err} }

type inError struct {
	what string
	err  error
}

func (e *inError) Error() string {
	return "rpcd: " + e.what + ": " + strings.TrimPrefix(e.err.Error(), "rpcd: ")
}

func (e *inError) Unwrap() error { return e.err }
