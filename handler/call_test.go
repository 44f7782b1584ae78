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
	c.End()
	// Reused for the next call: fresh state.
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
	c.End()

	// A late timer from the previous call must not cancel the next one.
	c.Start(context.Background(), time.Now().Add(time.Hour))
	done := c.Done()
	time.Sleep(10 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("next call cancelled by an old deadline")
	default:
	}
	c.End()

	// Err notices a passed deadline even when Done was never asked for.
	c.Start(context.Background(), time.Now().Add(-time.Millisecond))
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err past the deadline = %v", c.Err())
	}
	c.End()
}
