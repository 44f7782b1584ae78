package proto

import (
	"errors"
	"fmt"
)

// ErrProtocol is matched (with errors.Is) by every error that Decode returns
// for bytes that break the protocol. The receiver of such bytes sends a GoAway
// and closes the connection.
var ErrProtocol = errors.New("rpcd: protocol error")

// errProtocol returns an error that wraps ErrProtocol with the rule broken.
func errProtocol(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...)
}
