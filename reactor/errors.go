package reactor

import "errors"

// ErrServerClosed is returned by ListenAndServe after Shutdown.
var ErrServerClosed = errors.New("rpcd: server closed")

// errAlreadyStarted is returned by a second ListenAndServe or Start.
var errAlreadyStarted = errors.New("rpcd: server already started")
