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
// slot with at most one call in flight and no goroutine of its own. A
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
}

// asyncConn is one client and its callers.
type asyncConn struct {
	d     *asyncDriver
	cl    *client.Client
	pacer *loadgen.Wheel[*asyncSlot]

	// pipe makes its callers' calls, by slot. Held (Pipe.Run; its done
	// functions run so), it is the connection's lock too: it guards the
	// tally and the slots' busy and next, so that a call answered takes no
	// lock of the driver's.
	pipe *client.Pipe
	connTally
	slots []asyncSlot
	one   [1]asyncSlot // slots, for a connection of one caller: on the connection's lines, not an object of their own
}

// bind rebinds c to rec, with c's pipe held.
func (c *asyncConn) bind(rec *loadgen.Recorder) {
	c.pipe.Run(func() { c.rebind(rec) })
}

// asyncSlot is one caller: its scenario's calls, one at a time.
type asyncSlot struct {
	c    *asyncConn
	tag  int // its place in c.slots, its calls' tag in c.pipe
	call frameCall

	busy bool          // a call is in flight or starting; guarded by c.pipe
	next time.Duration // when the next call is due (open loop), or may start after a failure; guarded by c.pipe

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
		clock: time.Now(), halt: make(chan struct{})}
	if cfg.sc.Codec == "raw" {
		d.codec = proto.CodecRaw
	}
	pacers := 1 // a closed loop's pacer only restarts callers after failures
	if cfg.rate > 0 {
		d.interval = time.Duration(float64(cfg.conns*cfg.inflight) / cfg.rate * float64(time.Second))
		pacers = min(runtime.GOMAXPROCS(0), cfg.conns)
	}
	d.pacers = make([]*loadgen.Wheel[*asyncSlot], pacers)
	for i := range d.pacers {
		d.pacers[i] = new(loadgen.Wheel[*asyncSlot])
	}
	d.conns = make([]*asyncConn, cfg.conns)
	for i, cl := range clients {
		c := &asyncConn{d: d, cl: cl, pacer: d.pacers[i%pacers], connTally: connTally{i: i}}
		if c.slots = c.one[:]; cfg.inflight > 1 {
			c.slots = make([]asyncSlot, cfg.inflight)
		}
		for s := range c.slots {
			sl := &c.slots[s]
			sl.c, sl.tag, sl.call = c, s, cfg.sc.frames(i*cfg.inflight+s)
		}
		c.pipe = cl.NewPipe(cfg.inflight, func(tag int, reply []byte, err error) { c.slots[tag].answered(reply, err) })
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
			for s := range c.slots {
				sl := &c.slots[s]
				switch {
				case sl.busy:
					// Still in flight from the last phase: stop waited for it.
				case d.interval == 0:
					sl.busy = true
					d.issue(sl, now, now)
				default:
					w := c.i*len(c.slots) + s
					sl.next = now + time.Duration(float64(w)/d.rate*float64(time.Second))
					c.pacer.Add(sl, sl.next)
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
	sl.req = sl.call.request(sl.req[:0])
	sl.c.pipe.Next(sl.tag, d.codec, d.route, sl.req, sl.reply[:0])
}

// answered is a slot's done function, run with its pipe held: it records
// the call and starts the caller's next one, now or from its pacer.
func (sl *asyncSlot) answered(reply []byte, err error) {
	c, d := sl.c, sl.c.d
	var now time.Duration
	if at := c.pipe.Answered(); !at.IsZero() {
		now = at.Sub(d.clock)
	} else {
		now = d.now()
	}
	bytes := 0
	if err == nil {
		bytes, err = sl.call.check(reply)
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
	switch {
	case !d.running.Load():
		sl.busy = false
	case err != nil:
		if d.interval == 0 {
			sl.next = now
		}
		sl.busy = false
		c.pacer.Add(sl, sl.next) // at its next tick at the soonest
	case d.interval == 0:
		again = true
	case sl.next <= now:
		again, sched = true, sl.next // late: at once, its latency counted from when it was due
		sl.next += d.interval
	default:
		sl.busy = false
		c.pacer.Add(sl, sl.next)
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

// fire is the pacers': slot e.Item's next call came due by now. An entry
// whose time is not the slot's next is stale, left by a phase before; one
// whose slot is busy is its answer's to follow.
func (d *asyncDriver) fire(e loadgen.Entry[*asyncSlot], now time.Duration) {
	sl := e.Item
	sl.c.pipe.Run(func() {
		if !d.running.Load() || sl.busy || e.Due != sl.next {
			return
		}
		sched := now
		if d.interval > 0 {
			sched = sl.next
			sl.next += d.interval
		}
		sl.busy = true
		d.issue(sl, sched, now)
	})
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
