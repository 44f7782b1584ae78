package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// chaosRecord is the route `rpcd serve -chaos-ledger FILE` adds: each run
// appends its argument, a call key, as a line of FILE, so that rpcd chaos
// can count how many times each of its calls ran across restarts.
const chaosRecord = "Chaos/Record"

// chaosKeyMax bounds a call key.
const chaosKeyMax = 64

// handleChaosRecord registers Chaos/Record on reg, appending to file, and
// returns the function that closes the file.
func handleChaosRecord(reg *handler.Registry, file string) (func() error, error) {
	fh, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("rpcd: opening the chaos ledger: %w", err)
	}
	var mu sync.Mutex
	reg.HandleFunc(chaosRecord, func(_ context.Context, key, reply []byte) ([]byte, error) {
		if len(key) == 0 || len(key) > chaosKeyMax || bytes.IndexByte(key, '\n') >= 0 {
			return nil, handler.Errorf(proto.CodeInvalidArgument, "a chaos key is 1 to %d bytes without a newline", chaosKeyMax)
		}
		line := make([]byte, 0, len(key)+1)
		line = append(append(line, key...), '\n')
		// One write of the whole line, under O_APPEND: a line is in the
		// file (the kernel's page cache, which outlives a SIGKILL) before
		// the reply is sent, or the call fails.
		mu.Lock()
		_, err := fh.Write(line)
		mu.Unlock()
		if err != nil {
			return nil, handler.Errorf(proto.CodeInternal, "writing the chaos ledger: %v", err)
		}
		return append(reply, "ok"...), nil
	}, handler.Blocking())
	return fh.Close, nil
}
