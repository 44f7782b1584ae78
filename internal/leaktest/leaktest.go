// Package leaktest checks tests for leaked goroutines with goleak, knowing
// the goroutines that dependencies start once per process and keep.
package leaktest

import (
	"testing"

	"go.uber.org/goleak"
)

// processWide are goroutines started at package initialisation that live as
// long as the process: gnet's default worker pool (ants) starts two.
var processWide = []goleak.Option{
	goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
	goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
}

// VerifyTestMain runs the tests, then fails the run if any goroutine they
// started is still running. opts add to goleak's options (a Cleanup, more
// goroutines to ignore).
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	goleak.VerifyTestMain(m, append(opts, processWide...)...)
}

// VerifyNone fails t if any goroutine other than the process-wide ones is
// running.
func VerifyNone(t testing.TB) {
	goleak.VerifyNone(t, processWide...)
}
