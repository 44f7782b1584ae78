package client

import (
	"context"
	"sync"
	"time"
)

// A call under Options.Timeout whose own context can never end
// (context.Background, say) gets a timeoutCtx instead of
// context.WithTimeout: the same deadline, with one allocation instead of
// four and without a runtime timer per call, which cost a sequential call
// 2.4 to 4.7 us of client CPU while the machine was busy (0.4 in a quiet
// spell; docs/performance.md). The call's frame carries the deadline to the
// server; a caller that reads its own reply reads under it (lead); only a
// caller that waits on Done, behind another reader or for a connection,
// needs a wake-up at the deadline, and the client's timeoutSweep, one
// timer for all such calls, gives it, at most sweepEvery late.

// sweepEvery is how often the sweep looks for passed deadlines while calls
// wait on them: far enough that its timer does not cost every call (see
// lingerWatch), near enough for a deadline.
const sweepEvery = 10 * time.Millisecond

// timeoutCtx is a call's context under Options.Timeout.
type timeoutCtx struct {
	context.Context // the caller's, which never ends: its values
	deadline        time.Time
	sweep           *timeoutSweep

	mu   sync.Mutex
	done chan struct{} // made by the first Done; closed at the deadline
	err  error         // context.DeadlineExceeded once done is closed
}

func (t *timeoutCtx) Deadline() (time.Time, bool) { return t.deadline, true }

// Done returns a channel closed once the deadline has passed, by the
// sweep, which watches t from the first Done until end.
func (t *timeoutCtx) Done() <-chan struct{} {
	t.mu.Lock()
	done, first := t.done, t.done == nil
	if first {
		done = make(chan struct{})
		t.done = done
		if !time.Now().Before(t.deadline) {
			t.expireLocked()
			first = false
		}
	}
	t.mu.Unlock()
	if first {
		t.sweep.add(t) // not under t.mu: the sweep takes t.mu under its own
	}
	return done
}

func (t *timeoutCtx) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// expire ends t if its deadline has passed by now; it reports whether it
// has ended.
func (t *timeoutCtx) expire(now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil && !now.Before(t.deadline) {
		t.expireLocked()
	}
	return t.err != nil
}

func (t *timeoutCtx) expireLocked() {
	t.err = context.DeadlineExceeded
	close(t.done)
}

// end stops the sweep's watch of t, when its call is over.
func (t *timeoutCtx) end() {
	t.mu.Lock()
	watched := t.done != nil && t.err == nil
	t.mu.Unlock()
	if watched {
		t.sweep.remove(t)
	}
}

// timeoutSweep ends the timeoutCtxs whose callers wait on Done once their
// deadlines pass, on one timer for the whole client, armed while any waits.
type timeoutSweep struct {
	mu     sync.Mutex
	ctxs   map[*timeoutCtx]struct{}
	timer  *time.Timer // runs look
	closed bool
}

func newTimeoutSweep() *timeoutSweep {
	s := &timeoutSweep{ctxs: make(map[*timeoutCtx]struct{})}
	s.timer = time.AfterFunc(time.Hour, s.look)
	s.timer.Stop()
	return s
}

// bound gives a call's context ctx the deadline timeout from now, when it
// has none and timeout is positive (Options.Timeout): a timeoutCtx if ctx
// never ends, else context.WithTimeout. The call releases it when over.
func (s *timeoutSweep) bound(ctx context.Context, timeout time.Duration) (context.Context, bounded) {
	if _, ok := ctx.Deadline(); ok || timeout <= 0 {
		return ctx, bounded{}
	}
	if ctx.Done() == nil {
		tc := &timeoutCtx{Context: ctx, deadline: time.Now().Add(timeout), sweep: s}
		return tc, bounded{tc: tc}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	return ctx, bounded{cancel: cancel}
}

// bounded is what bound gave a call, to release once the call is over.
type bounded struct {
	tc     *timeoutCtx
	cancel context.CancelFunc
}

func (b bounded) release() {
	switch {
	case b.tc != nil:
		b.tc.end()
	case b.cancel != nil:
		b.cancel()
	}
}

func (s *timeoutSweep) add(t *timeoutCtx) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctxs[t] = struct{}{}
	if len(s.ctxs) == 1 && !s.closed {
		s.timer.Reset(sweepEvery)
	}
}

func (s *timeoutSweep) remove(t *timeoutCtx) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ctxs, t)
}

// look ends the contexts whose deadlines have passed.
func (s *timeoutSweep) look() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for t := range s.ctxs {
		if t.expire(now) {
			delete(s.ctxs, t)
		}
	}
	if len(s.ctxs) > 0 && !s.closed {
		s.timer.Reset(sweepEvery)
	}
}

// stop ends the sweep, when the client closes; contexts it watched end
// with their calls, which the closing fails.
func (s *timeoutSweep) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.timer.Stop()
	clear(s.ctxs)
}
