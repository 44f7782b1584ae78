package reactor

import (
	"errors"
	"net"
)

// On Windows every connection is served on the standard library transport
// (Options.StdTransport is always set there): no event loop runs, so what
// only a loop's connections use is never called. These stand in for the
// Unix forms (socket_unix.go, accept.go) so that the package builds.

var errNoLoops = errors.New("rpcd: no event loops on Windows")

// newPollListener returns ln: Go's network poller accepts on Windows.
func newPollListener(ln net.Listener) net.Listener { return ln }

func readSocket(fd int, b []byte) (int, error) { return 0, errNoLoops }

func writeSocket(fd int, a, b []byte) (int, error) { return 0, errNoLoops }
