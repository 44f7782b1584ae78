package load

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/internal/loadgen"
	"github.com/rpcd/rpcd/proto"
)

// asyncDriver runs the load of a scenario that has frames (the named ones,
// RawRoute's, JSONRoute's) on one server: a client.Client of one
// connection per Config.Conns, and on each Config.Inflight callers, each a
// slot with at most one call in flight (a soak's, a group of slots: below)
// and no goroutine of its own. A
// connection's callers are the tags of one client.Pipe; its done function,
// on the goroutine that reads the connection, records the call (its
// latency up to when the client read its reply, a clock read a batch of
// replies rather than a call) and, in a closed loop, starts its caller's
// next call (Pipe.Next), which the client sends with the others its batch
// of replies starts, in one write. In an open loop a few pacers
// (loadgen.Wheel, the scheduler loadgen.Run's open loop runs on) start
// each caller's calls at their times, at most a tick late, and a call
// answered after its successor was due starts that one at once, its
// latency counted from when it was due. Deadlines are the clients'
// (Options.Timeout), redials and retries too.
//
// With a depth above 1 (an open loop's pipelining) a caller is a group of
// depth slots that share its schedule: each call goes at its time on a
// free slot of the group, behind those of its calls still unanswered, as
// an open loop's client does, and the calls a pacer finds due together go
// in one write. Only when all depth are in flight does the next wait for
// an answer.
//
// A call that fails is never followed at once: its caller's next call
// waits for its pacer's next tick, so that a client that fails calls
// before sending them (no connection) neither recurses nor spins.
type asyncDriver struct {
	phase
	route    string
	codec    proto.Codec
	timeout  time.Duration
	rate     float64       // calls/s in all; 0 is a closed loop
	interval time.Duration // open loop: between a caller's calls
	depth    int           // a caller's slots: its calls in flight at most
	clock    time.Time     // the origin of every time below (monotonic)
	conns    []*asyncConn
	pacers   []*loadgen.Wheel[*asyncSlot]
	halt     chan struct{} // closed at close: the pacers end
	wg       sync.WaitGroup
}

// driverConfig is a load for an asyncDriver.
type driverConfig struct {
	addr     string
	opts     client.Options
	sc       Scenario
	conns    int
	inflight int           // callers per connection
	rate     float64       // calls/s in all; 0 is a closed loop
	timeout  time.Duration // each call's deadline
	// depth is, in an open loop, how many calls a caller has in flight at
	// most: each goes at its time while fewer are unanswered. 1 if 0 (and
	// in a closed loop): each call waits for the one before.
	depth int
}

// asyncConn is one client and its callers.
type asyncConn struct {
	d     *asyncDriver
	cl    *client.Client
	pacer *loadgen.Wheel[*asyncSlot]

	// pipe makes its callers' calls, by slot. Held (Pipe.Run; its done
	// functions run so), it is the connection's lock too: it guards the
	// tally and the slots' busy, next and paced, so that a call answered
	// takes no lock of the driver's.
	pipe *client.Pipe
	connTally
	slots []asyncSlot
	// own holds the slots when they are few, up to a soak's connection's
	// (DefaultPipeline): on the connection's lines, not an object of their
	// own.
	own [DefaultPipeline]asyncSlot
}

// bind rebinds c to rec, with c's pipe held.
func (c *asyncConn) bind(rec *loadgen.Recorder) {
	c.pipe.Run(func() { c.rebind(rec) })
}

// asyncSlot is one call in flight at a time, with its scenario's calls
// (frameCall's request and check; a fixed request is req for good); a
// caller is a group of depth of them, its schedule kept by the first
// (lead).
type asyncSlot struct {
	c       *asyncConn
	lead    *asyncSlot // its caller's first slot: itself at depth 1
	tag     int        // its place in c.slots, its calls' tag in c.pipe
	request func(dst []byte) []byte
	check   func(reply []byte) (int, error)

	// Guarded by c.pipe: whether a call is in flight or starting; and the
	// caller's, in its lead: when its next call is due (open loop), or may
	// start after a failure, and whether the pacer holds an entry for that
	// time (one is enough: a stale one is skipped).
	busy, paced bool
	next        time.Duration

	// The call in flight's, set by whoever starts it and read by its done
	// function, which the client runs after the start.
	req, reply  []byte
	sched, sent time.Duration // when it was due (its latency counts from then), and sent
}

// dialAsync opens the clients of cfg's load and starts the pacers; no call
// is made before start.
func dialAsync(ctx context.Context, cfg driverConfig) (*asyncDriver, error) {
	opts := cfg.opts
	opts.Timeout = cfg.timeout // each call's deadline, with no context per call
	// Many connections are read by the client's event loops, not a
	// goroutine each: 10,000 × 5/s took 0.82× the load CPU a call, 100 × 1
	// made 1.09× the calls (docs/performance.md). One connection keeps its
	// listener, which waits on the socket itself (1 × 128: 0.94× with a
	// loop, within the noise of three rounds).
	opts.EventLoops = cfg.conns > 1
	clients, err := dialClients(ctx, cfg.addr, cfg.conns, opts)
	if err != nil {
		return nil, err
	}
	d := &asyncDriver{route: cfg.sc.Route, codec: proto.CodecJSON, timeout: cfg.timeout, rate: cfg.rate,
		depth: 1, clock: time.Now(), halt: make(chan struct{})}
	if cfg.sc.Codec == "raw" {
		d.codec = proto.CodecRaw
	}
	pacers := 1 // a closed loop's pacer only restarts callers after failures
	if cfg.rate > 0 {
		d.interval = time.Duration(float64(cfg.conns*cfg.inflight) / cfg.rate * float64(time.Second))
		pacers = min(runtime.GOMAXPROCS(0), cfg.conns)
		d.depth = max(cfg.depth, 1)
	}
	d.pacers = make([]*loadgen.Wheel[*asyncSlot], pacers)
	for i := range d.pacers {
		d.pacers[i] = new(loadgen.Wheel[*asyncSlot])
	}
	d.conns = make([]*asyncConn, cfg.conns)
	for i, cl := range clients {
		c := &asyncConn{d: d, cl: cl, pacer: d.pacers[i%pacers], connTally: connTally{i: i}}
		n := cfg.inflight * d.depth
		if c.slots = c.own[:min(n, len(c.own))]; n > len(c.own) {
			c.slots = make([]asyncSlot, n)
		}
		for s := range c.slots {
			sl := &c.slots[s]
			fc := cfg.sc.frames(i*n + s)
			sl.c, sl.lead, sl.tag = c, &c.slots[s-s%d.depth], s
			sl.request, sl.check, sl.req = fc.request, fc.check, fc.fixed // a fixed req is shared, never written
		}
		c.pipe = cl.NewPipe(n, func(tag int, reply []byte, err error) { c.answered(&c.slots[tag], reply, err) })
		d.conns[i] = c
	}
	for _, w := range d.pacers {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			w.Pace(d.halt, d.now, d.fire)
		}()
	}
	return d, nil
}

// now is the driver's clock: time since d.clock on the monotonic clock.
func (d *asyncDriver) now() time.Duration { return time.Since(d.clock) }

// start begins a phase of calls recorded in rec: at most limit of them if
// it is positive. In a closed loop every caller calls at once, a
// connection's first calls in one write; in an open loop caller w's first
// call is due w/rate from now, as loadgen.Run spreads them.
func (d *asyncDriver) start(rec *loadgen.Recorder, limit int64) {
	d.begin(rec, limit)
	now := d.now()
	for _, w := range d.pacers {
		w.Reset(now)
	}
	for _, c := range d.conns {
		c.pipe.Run(func() { // a closed loop's first calls go out together
			c.rebind(rec)
			for s := 0; s < len(c.slots); s += d.depth {
				sl := &c.slots[s] // a caller's lead
				switch {
				case d.interval == 0 && sl.busy:
					// Still in flight from the last phase: stop waited for it.
				case d.interval == 0:
					sl.busy = true
					d.issue(sl, now, now)
				default:
					w := c.i*len(c.slots)/d.depth + s/d.depth
					sl.next = now + time.Duration(float64(w)/d.rate*float64(time.Second))
					sl.paced = false // the pacers were cleared
					c.pace(sl)
				}
			}
		})
	}
}

// issue starts slot sl's next call, due at sched, at now; sl is busy, and
// the caller holds its pipe: a call that fails before it is sent runs its
// done function on this goroutine.
func (d *asyncDriver) issue(sl *asyncSlot, sched, now time.Duration) {
	d.flying.Add(1)
	d.send(sl, sched, now)
}

// send is issue for a call already counted in flight: the next call of a
// slot whose last one answered keeps its count, which costs a closed loop
// two locked instructions a call less.
func (d *asyncDriver) send(sl *asyncSlot, sched, now time.Duration) {
	if !d.running.Load() || !d.take() {
		sl.busy = false
		d.flying.Add(-1)
		return
	}
	sl.sched, sl.sent = sched, now
	if sl.request != nil {
		sl.req = sl.request(sl.req[:0])
	}
	sl.c.pipe.Next(sl.tag, d.codec, d.route, sl.req, sl.reply[:0])
}

// answered is the done function of c's slot sl, run with its pipe held: it
// records the call and starts the caller's next one, now or from its
// pacer. c comes from the done function, not sl: the connection's fields
// load beside the slot's, not after it.
func (c *asyncConn) answered(sl *asyncSlot, reply []byte, err error) {
	d := c.d
	var now time.Duration
	if at := c.pipe.Answered(); !at.IsZero() {
		now = at.Sub(d.clock)
	} else {
		now = d.now()
	}
	bytes := 0
	if err == nil {
		bytes, err = sl.check(reply)
	}
	sl.reply = reply[:0]
	again, sched := false, now
	c.rebind(d.rec.Load())
	if c.tally != nil {
		if err == nil {
			c.tally.Done(now-sl.sched, now-sl.sent, bytes)
		} else {
			c.tally.Failed(classify(err), now-sl.sent)
		}
	}
	g := sl.lead
	switch {
	case !d.running.Load():
		sl.busy = false
	case err != nil:
		if d.interval == 0 {
			g.next, g.paced = now, false
		}
		sl.busy = false
		c.pace(g) // at its next tick at the soonest
	case d.interval == 0:
		again = true
	case g.next <= now:
		again, sched = true, g.next // late: at once, its latency counted from when it was due
		g.next += d.interval
		g.paced = false // an entry for the time just taken is stale
		c.pace(g)
	default:
		sl.busy = false
		c.pace(g)
	}
	if err != nil {
		d.noteKind(classify(err), err.Error())
	}
	if again {
		d.send(sl, sched, now)
		return
	}
	d.flying.Add(-1)
}

// fire is the pacers': the next call of the caller whose lead is e.Item
// came due by now. It starts it, and in an open loop every other call of
// the caller due by now that a free slot can take, all in one write. An
// entry whose time is not the caller's next is stale, left by an answer
// that started that call or by a phase before; a caller with every slot
// busy is its answers' to follow.
func (d *asyncDriver) fire(e loadgen.Entry[*asyncSlot], now time.Duration) {
	g := e.Item
	g.c.pipe.Run(func() {
		if !d.running.Load() || e.Due != g.next {
			return
		}
		g.paced = false // this entry
		for {
			sl := g.free()
			if sl == nil {
				break // every slot busy: their answers follow up
			}
			sched := now
			if d.interval > 0 {
				sched = g.next
				g.next += d.interval
			}
			sl.busy = true
			d.issue(sl, sched, now)
			if !sl.busy {
				return // not sent: the phase is over, or it failed and its answer paced its caller
			}
			if d.interval == 0 || g.next > now {
				break
			}
		}
		if d.interval > 0 && !g.paced && g.next > now {
			// The next call's entry now, even with every slot busy: an
			// answer that comes before it is due then leaves the wheel
			// alone, on the goroutine that read it (an entry that finds
			// every slot busy is its answers' to follow). A call due
			// already is theirs too: its entry would find them busy at
			// every tick.
			g.paced = true
			g.c.pacer.Add(g, g.next)
		}
	})
}

// free returns a slot of lead g's caller with no call in flight, or nil.
func (g *asyncSlot) free() *asyncSlot {
	for i := range g.c.d.depth {
		if sl := &g.c.slots[g.tag+i]; !sl.busy {
			return sl
		}
	}
	return nil
}

// pace has the pacer hold an entry for lead g's next call, unless it holds
// one or every slot of g's caller is busy (an answer then follows up).
func (c *asyncConn) pace(g *asyncSlot) {
	if !g.paced && g.free() != nil {
		g.paced = true
		c.pacer.Add(g, g.next)
	}
}

// stop ends the phase: no call starts after it, and it waits for those in
// flight to be answered or to pass their deadline (for at most a second
// past it), empties the pacers' wheels, then flushes every Tally into the
// phase's Recorder.
func (d *asyncDriver) stop() {
	d.drain(d.timeout + time.Second)
	for _, w := range d.pacers {
		w.Clear()
	}
	d.swap(nil)
}

// swap records the calls answered from now on in rec, and returns the
// Recorder they went to before, with every Tally flushed into it.
func (d *asyncDriver) swap(rec *loadgen.Recorder) *loadgen.Recorder {
	old := d.rec.Swap(rec)
	for _, c := range d.conns {
		c.bind(rec)
	}
	return old
}

// close stops the pacers and closes the clients, which fails any call
// still in flight.
func (d *asyncDriver) close() {
	d.running.Store(false)
	close(d.halt)
	d.wg.Wait()
	for _, c := range d.conns {
		c.cl.Close()
	}
}
