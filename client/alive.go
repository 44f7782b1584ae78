package client

import (
	"sync"
	"time"
)

// Keep-alive watches (Options.KeepAlive). A client's connections are
// looked at every quarter of KeepAlive (or of KeepAliveTimeout, if
// shorter) by its watch: whether bytes came since its last look (the
// reader marks it; calls never touch the watch), so that a Ping goes out
// after KeepAlive to 5/4 of it of silence, and a connection fails a quarter
// of KeepAliveTimeout at the most after that has passed since its Ping
// (wire.checkAlive). The watch is one goroutine for every client of the
// process that looks as often, not one a client: a load generator's 10,000
// clients of one connection each held 10,000 goroutines and tickers.

// aliveWatches are the process's keep-alive watches, by how often they
// look.
var aliveWatches = struct {
	mu     sync.Mutex
	byTick map[time.Duration]*aliveWatch
}{byTick: map[time.Duration]*aliveWatch{}}

// aliveWatch looks at its clients' connections every tick, until its last
// client leaves.
type aliveWatch struct {
	tick    time.Duration
	clients map[*Client]struct{} // guarded by aliveWatches.mu
	stop    chan struct{}        // closed as its last client leaves
}

// aliveTick is how often the keep-alive watch of a client of o looks.
func aliveTick(o *Options) time.Duration {
	return max(min(o.KeepAlive, o.KeepAliveTimeout)/4, time.Millisecond)
}

// watchAlive has c's connections watched, if Options.KeepAlive asks it.
func (c *Client) watchAlive() {
	if c.opts.KeepAlive <= 0 {
		return
	}
	tick := aliveTick(&c.opts)
	aliveWatches.mu.Lock()
	defer aliveWatches.mu.Unlock()
	w := aliveWatches.byTick[tick]
	if w == nil {
		w = &aliveWatch{tick: tick, clients: map[*Client]struct{}{}, stop: make(chan struct{})}
		aliveWatches.byTick[tick] = w
		go w.run()
	}
	w.clients[c] = struct{}{}
	c.alive = w
}

// unwatchAlive ends the watch of c's connections, at Close; the watch's
// goroutine ends with its last client.
func (c *Client) unwatchAlive() {
	w := c.alive
	if w == nil {
		return
	}
	aliveWatches.mu.Lock()
	defer aliveWatches.mu.Unlock()
	delete(w.clients, c)
	if len(w.clients) == 0 {
		delete(aliveWatches.byTick, w.tick)
		close(w.stop)
	}
}

// run looks at every client's connections each tick. A client closed
// during a look is looked at once more, harmlessly: its connections have
// failed, or are failing, and a failed one is passed over.
func (w *aliveWatch) run() {
	t := time.NewTicker(w.tick)
	defer t.Stop()
	var look []*Client
	for {
		select {
		case <-t.C:
		case <-w.stop:
			return
		}
		aliveWatches.mu.Lock()
		for c := range w.clients {
			look = append(look, c)
		}
		aliveWatches.mu.Unlock()
		now := time.Now()
		for _, c := range look {
			c.checkAlive(now)
		}
		clear(look)
		look = look[:0]
	}
}

// checkAlive is the watch's look at c's connections at now.
func (c *Client) checkAlive(now time.Time) {
	for _, s := range c.slots {
		if w := s.w.Load(); w != nil && !w.dead() {
			w.checkAlive(now, c.opts.KeepAlive, c.opts.KeepAliveTimeout)
		}
	}
}
