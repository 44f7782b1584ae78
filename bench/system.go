package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/rpcd/rpcd/internal/loadgen"
)

// A system is one RPC framework (or floor) under test: a server that echoes
// a payload back byte for byte, and a client that calls it.
type system interface {
	// name is the system's name in flags and tables.
	name() string
	// serve starts the echo server on addr ("127.0.0.1:0" picks a port) and
	// returns the address it is bound to and a function that stops it.
	serve(addr string) (stop func(), boundAddr string, err error)
	// dial connects conns connections to the server at addr.
	dial(addr string, conns int) (caller, error)
}

// A caller makes echo calls over a system's connections. It is safe for
// concurrent use; worker (0 to callers-1) picks the connection, worker %
// conns, for systems that do not spread calls themselves.
type caller interface {
	// call sends req and returns the reply payload: appended to reply[:0]
	// where the system's API takes a buffer, else a slice the system hands
	// over for good (never one it reuses), so no system pays for an extra
	// copy. It must not keep req or reply after it returns.
	call(ctx context.Context, worker int, req, reply []byte) ([]byte, error)
	// close closes every connection; calls still waiting fail.
	close() error
}

// serveInBackground runs serve on a goroutine of its own and returns the
// system's stop function: it calls halt, then waits for serve to return,
// at most 5 s (a peer's own stop may not wait for its connections, or may
// hang on one).
func serveInBackground(serve, halt func()) func() {
	done := make(chan struct{})
	go func() { defer close(done); serve() }()
	return func() {
		halt()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
	}
}

// systems lists every system by name, in table order: rpcd first (the
// ratios' base), then the peers, then the floors.
var systems = map[string]system{}

// systemOrder is the default order of systems in tables.
var systemOrder = []string{"rpcd", "grpc", "netrpc", "rpcx", "arpc", "drpc", "kitex", "tcp-floor", "gnet-floor"}

func register(s system) {
	if _, dup := systems[s.name()]; dup {
		panic("bench: system registered twice: " + s.name())
	}
	systems[s.name()] = s
}

// systemNames returns the registered systems in table order.
func systemNames() []string {
	var names []string
	for _, n := range systemOrder {
		if _, ok := systems[n]; ok {
			names = append(names, n)
		}
	}
	var extra []string
	for n := range systems {
		found := false
		for _, m := range names {
			found = found || m == n
		}
		if !found {
			extra = append(extra, n)
		}
	}
	sort.Strings(extra)
	return append(names, extra...)
}

// errWrongReply is loadgen's, so that loadgen counts it as "wrong reply".
var errWrongReply = loadgen.ErrWrongReply

// checkEcho returns nil if got is exactly want, and an error wrapping
// loadgen.ErrWrongReply that says how they differ otherwise.
func checkEcho(want, got []byte) error {
	if bytes.Equal(want, got) {
		return nil
	}
	if len(want) != len(got) {
		return fmt.Errorf("%w: %d bytes back, sent %d", errWrongReply, len(got), len(want))
	}
	for i := range want {
		if want[i] != got[i] {
			return fmt.Errorf("%w: byte %d is %#02x, sent %#02x", errWrongReply, i, got[i], want[i])
		}
	}
	return nil // not reached
}

// fillPattern fills a worker's request buffer with a pattern seeded by the
// worker, once; stampSeq then marks each call. Together they make a reply
// meant for another worker, or left over from an earlier call, fail the check.
func fillPattern(p []byte, worker int) {
	x := uint32(worker)*2654435761 + 1
	for i := range p {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		p[i] = byte(x)
	}
}

// stampSeq writes the call's sequence number over the first (up to) 8 bytes.
func stampSeq(p []byte, seq uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seq)
	copy(p, b[:])
}

// connIndex picks worker's connection out of n.
func connIndex(worker, n int) int { return worker % n }

// errNoSystem is returned for a system name that is not registered.
var errNoSystem = errors.New("bench: no such system")
