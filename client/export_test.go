package client

import "os"

func init() {
	// The whole suite over event loops (loops_linux.go): .ci/run runs it so
	// once.
	testEventLoops = os.Getenv("RPCD_TEST_EVENT_LOOPS") == "1"
}

// OnEventLoops reports whether the suite runs over event loops.
func OnEventLoops() bool { return testEventLoops }

// Pending returns the number of calls waiting in c's pending tables.
func Pending(c *Client) int {
	n := 0
	for _, s := range c.slots {
		if w := s.w.Load(); w != nil {
			n += w.pending.Len()
		}
	}
	return n
}

// Retries returns the number of times c has sent a call again.
func Retries(c *Client) uint64 { return c.retries.Load() }

// Swept returns the number of calls whose Options.Timeout deadline c's
// sweep watches.
func Swept(c *Client) int {
	c.sweep.mu.Lock()
	defer c.sweep.mu.Unlock()
	return len(c.sweep.ctxs)
}

// WatchedContexts returns the number of contexts c watches for its waiting callers.
func WatchedContexts(c *Client) int {
	n := 0
	for i := range c.ctxs.slots {
		if c.ctxs.slots[i].Load() != nil {
			n++
		}
	}
	return n
}

// ContextEnded returns the number of calls c's context watches have ended.
func ContextEnded(c *Client) uint64 { return c.ctxs.endedCalls.Load() }

// Listened returns the number of frames the listeners of c's connections
// read, rather than callers reading their own replies. Only after c.Close.
func Listened(c *Client) uint64 {
	var n uint64
	for _, s := range c.slots {
		if w := s.w.Load(); w != nil {
			n += w.rd.listened
		}
	}
	return n
}

// Listed returns the number of c's connections on its idle list (read.go's
// idleWires), and the number of its connections.
func Listed(c *Client) (listed, conns int) {
	for _, s := range c.slots {
		if w := s.w.Load(); w != nil {
			conns++
			if w.rd.listed.Load() {
				listed++
			}
		}
	}
	return listed, conns
}

// PipesListed returns how many pipes c's connections list (Pipe.Close).
func PipesListed(c *Client) int {
	n := 0
	for _, s := range c.slots {
		if w := s.w.Load(); w != nil {
			if ls := w.pipes.Load(); ls != nil {
				n += len(*ls)
			}
		}
	}
	return n
}
