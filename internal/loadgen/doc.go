// Package loadgen drives calls at a server and measures them: throughput,
// errors by kind, and latency percentiles from an HDR histogram. It knows
// nothing of rpcd's transport; a caller supplies the call. `rpcd bench` and
// the bench module's peer comparison both run on it.
//
// Two shapes of load: closed loop (Callers goroutines each call as fast as
// replies come) and open loop (Rate calls per second in total, each call's
// latency measured from when it was scheduled, so a stalled server cannot
// hide its latency by slowing the callers down, as wrk2 does it).
//
// An open loop is paced by a Wheel, a timing wheel of 1 ms ticks, and no
// caller holds a runtime timer: a tick's calls start together at its end,
// each at most a tick after its time once the pacer wakes (Go's runtime
// wakes a goroutine parked on a timer up to about a millisecond late in an
// otherwise idle process). Run's callers wait on one; package load's wire
// driver, which makes its calls its own way and sums them in a Recorder,
// paces its connections' calls on Wheels of its own.
package loadgen
