package client

import "sync/atomic"

// RetryBudget is ServiceOptions.RetryBudget: it bounds a Cluster's retries
// to a share of its calls, as gRPC's retry throttling does, so that a
// service that fails most calls is not sent each of them again
// MaxRetries times. The cluster holds up to MaxTokens tokens, and starts
// full. Each attempt that fails in a way the retry rules would send again
// takes a token; each attempt that succeeds gives back Ratio of one. While
// half of MaxTokens or fewer are left, no failed call is sent again (it
// fails with its own error). So a healthy service has its few failures
// retried, a burst of up to MaxTokens/2 failures (a node dying with calls
// on it) is retried whole, and a service in trouble gets about one retry
// for every 1/Ratio calls that succeed. Calls sent elsewhere because a node
// lacks their route, and calls waiting for a node under WaitForReady, take
// no token.
type RetryBudget struct {
	// MaxTokens is the budget's size; default 100, and a negative value
	// sets no budget (every call may be sent again MaxRetries times).
	MaxTokens int
	// Ratio is what an attempt that succeeds gives back, in tokens;
	// default 0.1. At most 1.
	Ratio float64
}

// retryBudget is a RetryBudget at work; its tokens are counted in
// thousandths.
type retryBudget struct {
	tokens atomic.Int64
	max    int64
	ratio  int64
}

// newRetryBudget returns the budget b sets, or nil for none.
func newRetryBudget(b RetryBudget) *retryBudget {
	if b.MaxTokens < 0 {
		return nil
	}
	if b.MaxTokens == 0 {
		b.MaxTokens = 100
	}
	if b.Ratio <= 0 {
		b.Ratio = 0.1
	}
	rb := &retryBudget{max: int64(b.MaxTokens) * 1000, ratio: int64(min(b.Ratio, 1) * 1000)}
	rb.ratio = max(rb.ratio, 1)
	rb.tokens.Store(rb.max)
	return rb
}

// succeeded gives back a share of a token for an attempt that succeeded.
// A full budget, the usual state, is only read.
func (b *retryBudget) succeeded() {
	for {
		v := b.tokens.Load()
		if v >= b.max || b.tokens.CompareAndSwap(v, min(v+b.ratio, b.max)) {
			return
		}
	}
}

// failed takes a token for an attempt that failed in a way the retry rules
// would send again, and reports whether the budget lets it be sent again.
func (b *retryBudget) failed() bool {
	for {
		v := b.tokens.Load()
		nv := max(v-1000, 0)
		if b.tokens.CompareAndSwap(v, nv) {
			return nv > b.max/2
		}
	}
}
