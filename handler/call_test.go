package handler

import (
	"context"
	"errors"
	"testing"
	"time"
)

type ctxKey string

func TestCallContext(t *testing.T) {
	parent := context.WithValue(context.Background(), ctxKey("tenant"), "acme")
	c := &Call{Route: "A/B", ID: 9}
	c.Start(parent, time.Time{})
	if _, ok := c.Deadline(); ok {
		t.Fatal("deadline without one set")
	}
	if c.Err() != nil {
		t.Fatal("Err before cancel")
	}
	if c.Value(ctxKey("tenant")) != "acme" {
		t.Fatal("parent value lost")
	}
	wrapped := context.WithValue(c, ctxKey("x"), 1)
	if CallFrom(wrapped) != c || CallFrom(c) != c {
		t.Fatal("CallFrom does not find the call")
	}
	if CallFrom(context.Background()) != nil {
		t.Fatal("CallFrom outside a call")
	}
	done := c.Done()
	select {
	case <-done:
		t.Fatal("done before cancel")
	default:
	}
	c.Cancel(context.Canceled)
	c.Cancel(context.DeadlineExceeded) // later cancels change nothing
	<-done
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("Err = %v", c.Err())
	}
	if c.End() {
		t.Fatal("a cancelled Call whose Done was handed out is reusable")
	}
	// A call that was cancelled but never handed out Done is reused with
	// fresh state.
	c = &Call{}
	c.Start(parent, time.Time{})
	c.Cancel(context.Canceled)
	if !c.End() {
		t.Fatal("a Call that handed nothing out is not reusable")
	}
	c.Start(parent, time.Time{})
	if c.Err() != nil {
		t.Fatal("reused call starts cancelled")
	}
	select {
	case <-c.Done():
		t.Fatal("reused call's Done is closed")
	default:
	}
	c.End()
}

func TestCallDeadline(t *testing.T) {
	c := &Call{}
	c.Start(context.Background(), time.Now().Add(30*time.Millisecond))
	if _, ok := c.Deadline(); !ok {
		t.Fatal("no deadline")
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done did not close at the deadline")
	}
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err = %v", c.Err())
	}
	if c.End() {
		t.Fatal("a Call whose deadline timer ran is reusable") // its timer could cancel the next call
	}

	// Err notices a passed deadline even when Done was never asked for.
	c = &Call{}
	c.Start(context.Background(), time.Now().Add(-time.Millisecond))
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err past the deadline = %v", c.Err())
	}
	c.End()
}

// TestDerivedContextOutlivesCall: a handler that derives a context from its
// Call (context.WithTimeout and friends start a goroutine that watches the
// Call's Done) makes the Call unfit for reuse, and ends the contexts derived
// from it when the call ends. Reusing it would let that goroutine find Done
// closed and Err nil on the next call, and the context package panics.
func TestDerivedContextOutlivesCall(t *testing.T) {
	var cancelled Call
	cancelled.Start(context.Background(), time.Time{})
	child, cancel := context.WithTimeout(&cancelled, time.Hour)
	defer cancel()
	cancelled.Cancel(context.Canceled)
	if cancelled.End() {
		t.Fatal("End allows reuse of a cancelled Call whose Done was handed out")
	}
	<-child.Done()
	if cancelled.Err() != context.Canceled || child.Err() != context.Canceled {
		t.Fatalf("after End: call %v, derived %v", cancelled.Err(), child.Err())
	}

	var finished Call // ends without being cancelled
	finished.Start(context.Background(), time.Now().Add(time.Hour))
	child2, cancel2 := context.WithCancel(&finished)
	defer cancel2()
	if finished.End() {
		t.Fatal("End allows reuse of a Call whose Done was handed out")
	}
	select {
	case <-child2.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a context derived from a call outlives it")
	}

	var plain Call // Done never called: reused, as the hot path needs
	plain.Start(context.Background(), time.Now().Add(time.Hour))
	if !plain.End() || plain.Err() != nil {
		t.Fatalf("a Call that handed nothing out: reusable false or Err %v", plain.Err())
	}
}
