package load

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/internal/compression"
	"github.com/rpcd/rpcd/internal/loadgen"
	"github.com/rpcd/rpcd/proto"
)

// The wire driver makes a load's calls without a client: it writes the
// request frames and reads the replies itself, many calls on each
// connection's one goroutine. A connection's goroutine reads what the
// server sent, checks and records every reply in it, and, in a closed
// loop, writes the next call of each caller answered in one write, as the
// server answers a wake-up's calls: no goroutine is woken per call, and a
// read and a write carry a batch. In an open loop (a Rate) a few pacer
// goroutines, one loadgen.Wheel each (the scheduler loadgen.Run's open
// loop runs on), send each caller's calls at their times, at most a tick
// late; on Linux they also read the replies, each from an epoll instance
// of its own (poll_linux.go). A connection holds a read buffer that grows
// with the replies and shrinks back, its callers' slots and its goroutine:
// about 4 KiB.
//
// Why not a client: the client driver, on a client.Pipe per connection,
// makes 0.87 to 0.90 of the wire driver's calls at 1.13 to 1.23 times its
// CPU a call with 128 callers on one connection, and 0.94 to 0.99 at 1.08
// to 1.14 times at 10,000 connections of 5 and 10 calls/s, holding 8.2 KiB
// resident a connection against 6.7 (docs/performance.md, "The load
// generator"). What it does not do a client does: a load whose frames are
// large, a service target, a scenario a program built, or Driver
// DriverClient.

// Drivers, for Config.Driver and SoakConfig.Driver.
const (
	// DriverAuto is the wire driver where it can run the load, clients
	// where it cannot.
	DriverAuto = ""
	// DriverWire speaks the protocol itself, many calls per goroutine.
	DriverWire = "wire"
	// DriverClient calls through a client.Client per connection, as a
	// program would (doc.go, "Drivers").
	DriverClient = "client"
)

// ParseDriver returns the driver name names as a user gives it (rpcd
// bench's and soak's -driver): "auto" or empty for DriverAuto, "wire" or
// "client"; and false for a name it does not know.
func ParseDriver(name string) (string, bool) {
	switch name {
	case "auto", DriverAuto:
		return DriverAuto, true
	case DriverWire, DriverClient:
		return name, true
	}
	return "", false
}

// wireMaxPayload is the largest request payload the wire driver sends:
// larger ones go through clients, whose writer goroutine keeps a large
// write from blocking the connection's reader.
const wireMaxPayload = 64 << 10

// wireMaxInFlight bounds the request bytes a connection's callers have in
// flight at once on the wire driver. Its reading goroutine also writes the
// next calls: were the replies owed to it to pass the server's high-water
// mark (reactor.Options.MaxOutbound, 8 MiB) while it waits to write, the
// server would stop reading it and neither side would move.
const wireMaxInFlight = 1 << 20

// Read buffer sizes of a connection: it starts small, grows while reads
// fill it (or to hold a frame), and shrinks back once its reads stay small.
const (
	wireReadMin    = 512
	wireReadMax    = 256 << 10
	wireShrinkRuns = 64 // reads in a row using under a quarter of the buffer
)

// driverFor returns the driver that runs a load of sc on addr under opts,
// inflight callers to a connection, when driver is asked for, or an error
// if the one asked cannot.
func driverFor(driver, addr string, sc Scenario, inflight int, opts client.Options) (string, error) {
	why := ""
	switch {
	case driver == DriverClient:
		return DriverClient, nil
	case driver != DriverAuto && driver != DriverWire:
		return "", errors.New("rpcd: load: Driver " + driver + ", want wire, client or empty")
	case sc.frames == nil:
		why = "a scenario of the program's own has only NewCall"
	case client.IsService(addr):
		why = "a service target needs a client.Cluster"
	case sc.Size > wireMaxPayload:
		why = "payloads past 64 KiB go through clients"
	case sc.Size*inflight > wireMaxInFlight:
		why = "more than 1 MiB of calls in flight on a connection go through clients"
	case len(opts.Interceptors) > 0 || opts.Handler != nil || opts.Pushes != nil:
		why = "interceptors, a handler and pushes are a client's"
	}
	if why == "" {
		return DriverWire, nil
	}
	if driver == DriverWire {
		return "", errors.New("rpcd: load: the wire driver cannot run this load: " + why)
	}
	return DriverClient, nil
}

// driverConfig is a load for a phased driver: the wire driver or the
// client driver on asynchronous calls.
type driverConfig struct {
	addr     string
	opts     client.Options
	sc       Scenario
	conns    int
	inflight int           // callers per connection
	rate     float64       // calls/s in all; 0 is a closed loop
	timeout  time.Duration // each call's deadline
}

// wireDriver runs a driverConfig's calls on its connections.
type wireDriver struct {
	cfg      driverConfig
	route    string
	codec    proto.Codec
	lim      proto.Limits
	zipMin   int
	deadline uint32        // each request's deadline field, ms
	interval time.Duration // open loop: between a caller's calls
	clock    time.Time     // the origin of every time below (monotonic)

	phase
	cs     []*wireConn
	pacers []*loadgen.Wheel[wireDue] // open loop
	polls  []*poller                 // open loop, one per pacer, where it has them; else nil

	ctx    context.Context // ends at close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// wireConn is one connection and its callers' slots.
type wireConn struct {
	d *wireDriver
	i int // its Tally's number, and its callers' from i*inflight

	mu sync.Mutex // guards what follows
	connTally
	nc        net.Conn // nil while it is redialled
	rio       *rawIO   // nc's raw I/O, where it has one
	looped    bool     // nc is its pacer's to read: end it with shutdownLocked; its goroutine closes it
	wfd       int      // looped: the socket its pacer reads (a duplicate of nc's), written raw; -1 before and after
	zip       proto.Compression
	goingAway bool
	slots     []wireSlot
	wbuf      []byte // frames to write
	pbuf      []byte // a request's payload, as encoded
	zbuf      []byte // a reply expanded, or a request compressed

	// Owned by whoever reads it: its goroutine, or its pacer.
	rbuf  []byte
	small int // reads in a row that used under a quarter of rbuf

	// Its pacer's while it reads the connection, and how it hands it back.
	pnc   net.Conn
	pfd   int
	lostc chan error
}

// wireSlot is one caller of a connection: at most one call in flight.
type wireSlot struct {
	call  frameCall
	gen   uint32        // its calls so far: the call id is gen*inflight + slot
	id    uint32        // the call in flight; 0 if none
	sched time.Duration // when the call in flight was due: its latency counts from then
	sent  time.Duration // when it was written
	next  time.Duration // open loop: when the next call is due
}

// now is the driver's clock: time since d.clock on the monotonic clock.
func (d *wireDriver) now() time.Duration { return time.Since(d.clock) }

// dialWire opens cfg.conns connections, in a few goroutines at once, and
// starts their goroutines; no call is made before start.
func dialWire(ctx context.Context, cfg driverConfig) (*wireDriver, error) {
	opts := cfg.opts
	d := &wireDriver{cfg: cfg, route: cfg.sc.Route, codec: proto.CodecJSON, lim: opts.Limits.WithDefaults(),
		zipMin: opts.CompressMin, clock: time.Now()}
	if cfg.sc.Codec == "raw" {
		d.codec = proto.CodecRaw
	}
	if d.zipMin <= 0 {
		d.zipMin = 1 << 10 // the client's default
	}
	d.deadline = uint32(max((cfg.timeout+time.Millisecond-1)/time.Millisecond, 1))
	if cfg.rate > 0 {
		d.interval = time.Duration(float64(cfg.conns*cfg.inflight) / cfg.rate * float64(time.Second))
		d.pacers = make([]*loadgen.Wheel[wireDue], min(runtime.GOMAXPROCS(0), cfg.conns))
		for i := range d.pacers {
			d.pacers[i] = new(loadgen.Wheel[wireDue])
		}
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.cs = make([]*wireConn, cfg.conns)
	for i := range d.cs {
		c := &wireConn{d: d, i: i, connTally: connTally{i: i}, slots: make([]wireSlot, cfg.inflight), wfd: -1}
		for s := range c.slots {
			c.slots[s].call = cfg.sc.frames(i*cfg.inflight + s)
		}
		d.cs[i] = c
	}

	// Dial in a few goroutines: one at a time, 10,000 connections took 4.5 s.
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var dials sync.WaitGroup
	for range min(8, cfg.conns) {
		dials.Add(1)
		go func() {
			defer dials.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= cfg.conns || failed.Load() != nil {
					return
				}
				nc, zip, err := client.DialConn(ctx, cfg.addr, opts)
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				d.cs[i].nc, d.cs[i].zip, d.cs[i].rio = nc, zip, newRawIO(nc)
			}
		}()
	}
	dials.Wait()
	if p := failed.Load(); p != nil {
		d.close()
		return nil, *p
	}
	if d.pacers != nil {
		d.polls = newPollers(len(d.pacers))
	}
	for _, c := range d.cs {
		if d.polls != nil {
			c.lostc = make(chan error, 1)
			c.looped = c.rio != nil
		}
		d.wg.Add(1)
		go c.run()
	}
	for k, w := range d.pacers {
		d.wg.Add(1)
		if d.polls != nil {
			go d.poll(k)
		} else {
			go d.pace(w)
		}
	}
	d.wg.Add(1)
	go d.sweep()
	return d, nil
}

// close closes every connection and waits for the driver's goroutines.
// A connection is closed without its lock held: Close waits for a read in
// progress, which may be waiting for the lock (rawIO handles what it reads
// within the read). One its pacer reads is only shut down, waking a write
// waiting for room: its goroutine closes it once the pacer, ending, hands
// it back.
func (d *wireDriver) close() {
	d.running.Store(false)
	d.cancel()
	for _, c := range d.cs {
		c.mu.Lock()
		nc, looped := c.nc, c.looped
		if looped {
			c.shutdownLocked()
		}
		c.mu.Unlock()
		if !looped && nc != nil {
			nc.Close()
		}
	}
	d.wg.Wait()
}

// start begins a phase of calls recorded in rec: at most limit of them if
// it is positive. In a closed loop every caller calls at once; in an open
// loop caller w's first call is due w/rate from now, as loadgen.Run
// spreads them.
func (d *wireDriver) start(rec *loadgen.Recorder, limit int64) {
	d.begin(rec, limit)
	now := d.now()
	for _, w := range d.pacers {
		w.Reset(now)
	}
	for _, c := range d.cs {
		c.mu.Lock()
		c.rebind()
		for s := range c.slots {
			sl := &c.slots[s]
			if sl.id != 0 {
				continue // still in flight from the last phase; stop waited for it
			}
			if d.interval == 0 {
				c.issue(s, now, now)
				continue
			}
			w := c.i*len(c.slots) + s
			sl.next = now + time.Duration(float64(w)/d.cfg.rate*float64(time.Second))
			d.pacerOf(c).Add(wireDue{c, int32(s)}, sl.next)
		}
		c.flushLocked()
		c.mu.Unlock()
	}
}

// stop ends the phase (endPhase).
func (d *wireDriver) stop() { endPhase(&d.phase, d.cfg.timeout+time.Second, d.pacers, d.cs) }

// swap records the calls answered from now on in rec (swapTallies).
func (d *wireDriver) swap(rec *loadgen.Recorder) *loadgen.Recorder {
	return swapTallies(&d.phase, d.cs, rec)
}

func (d *wireDriver) pacerOf(c *wireConn) *loadgen.Wheel[wireDue] { return d.pacers[c.i%len(d.pacers)] }

// rebind moves c's figures into its Recorder and takes the driver's
// current one; with c.mu held.
func (c *wireConn) rebind() { c.connTally.rebind(c.d.rec.Load()) }

// bind rebinds c to rec, under c's lock (bound).
func (c *wireConn) bind(rec *loadgen.Recorder) {
	c.mu.Lock()
	c.connTally.rebind(rec)
	c.mu.Unlock()
}

// issue writes the next call of slot s into the write buffer, due at
// sched and sent now; with c.mu held and the slot idle.
func (c *wireConn) issue(s int, sched, now time.Duration) {
	d := c.d
	if !d.take() {
		return
	}
	sl := &c.slots[s]
	k := uint32(len(c.slots))
	if sl.gen++; sl.gen > (1<<32-1)/k-1 {
		sl.gen = 1 // ids stay below 2^32, so that id%k is the slot
	}
	sl.id = sl.gen*k + uint32(s)
	sl.sched, sl.sent = sched, now
	d.flying.Add(1)

	c.pbuf = sl.call.request(c.pbuf[:0])
	h := proto.Header{Kind: proto.KindRequest, Codec: d.codec, ID: sl.id, Deadline: d.deadline}
	payload := c.pbuf
	if c.zip != proto.CompressionNone && len(payload) >= d.zipMin {
		if z := compression.Append(c.zbuf[:0], payload, c.zip); len(z) < len(payload) {
			h.Flags = h.Flags.WithCompression(c.zip)
			payload, c.zbuf = z, z
		}
	}
	c.wbuf = proto.AppendFrame(c.wbuf, h, d.route, nil, payload)
}

// next makes slot s's next call, its last one just answered or failed at
// now; with c.mu held.
func (c *wireConn) next(s int, now time.Duration) {
	d := c.d
	if !d.running.Load() {
		return
	}
	if d.interval == 0 {
		if c.nc != nil && !c.goingAway {
			c.issue(s, now, now)
		}
		return // redial or the successor calls again
	}
	sl := &c.slots[s]
	if sl.next <= now && c.nc != nil && !c.goingAway {
		due := sl.next
		sl.next += d.interval
		c.issue(s, due, now) // late: at once, its latency counted from when it was due
		return
	}
	d.pacerOf(c).Add(wireDue{c, int32(s)}, sl.next)
}

// due is the pacer's: slot s's call, due at at, is due now; with c.mu
// held. An entry whose time is not the slot's next is stale, left by a
// phase before.
func (c *wireConn) due(s int, at, now time.Duration) {
	d := c.d
	sl := &c.slots[s]
	if !d.running.Load() || sl.id != 0 || at != sl.next {
		return // in flight: its answer makes the next call, late
	}
	if c.nc == nil {
		// No connection: the call fails, as a client's does at once.
		if c.tally != nil {
			c.tally.Failed(proto.CodeUnavailable.String(), 0)
		}
		d.noteError(proto.CodeUnavailable, "connection lost; redialling")
		sl.next += d.interval
		d.pacerOf(c).Add(wireDue{c, int32(s)}, sl.next)
		return
	}
	if c.goingAway {
		sl.next += d.interval // the call is not made: the server is going away
		d.pacerOf(c).Add(wireDue{c, int32(s)}, sl.next)
		return
	}
	due := sl.next
	sl.next += d.interval
	c.issue(s, due, now)
	c.flushLocked()
}

// flushLocked writes what is queued, with c.mu held. The requests of a
// load the wire driver runs are small enough (wireMaxPayload) for the
// kernel to take them without the server's reading them first.
func (c *wireConn) flushLocked() {
	if len(c.wbuf) == 0 || c.nc == nil {
		c.wbuf = c.wbuf[:0]
		return
	}
	var err error
	switch {
	case c.wfd >= 0:
		err = writeFd(c.wfd, c.wbuf)
	case c.rio != nil:
		err = c.rio.write(c.wbuf)
	default:
		_, err = c.nc.Write(c.wbuf)
	}
	c.wbuf = c.wbuf[:0]
	switch {
	case err == nil:
	case c.looped:
		c.shutdownLocked() // its pacer reads the end and hands it back
	default:
		// The reader fails the calls and redials once the close ends its
		// read; closed on a goroutine of its own, as Close waits for that
		// read, which may be waiting for the lock held here.
		go c.nc.Close()
	}
}

// run is the connection's goroutine: it reads and handles the server's
// frames, and redials when the connection is lost, until the driver
// closes.
func (c *wireConn) run() {
	d := c.d
	defer d.wg.Done()
	c.rbuf = make([]byte, 0, wireReadMin)
	for attempt := 0; ; {
		c.mu.Lock()
		nc, rio := c.nc, c.rio
		c.mu.Unlock()
		if nc != nil {
			err := c.read(nc, rio)
			c.lost(nc, err)
			attempt = 0
			if err == errGoneAway {
				attempt = -1 // a successor at once, as a client's slot dials one
			}
		}
		if d.ctx.Err() != nil {
			return
		}
		// Redial with backoff, as a client's slot does.
		o := d.cfg.opts
		if attempt >= 0 {
			back := max(o.MinBackoff, 50*time.Millisecond) << min(attempt, 10)
			if mx := max(o.MaxBackoff, 5*time.Second); back > mx {
				back = mx
			}
			select {
			case <-time.After(back/2 + rand.N(back/2+1)):
			case <-d.ctx.Done():
				return
			}
		}
		attempt++
		nc, zip, err := client.DialConn(d.ctx, d.cfg.addr, o)
		if err != nil {
			continue
		}
		c.mu.Lock()
		if d.ctx.Err() != nil {
			c.mu.Unlock()
			nc.Close()
			return
		}
		c.nc, c.zip, c.goingAway, c.rio = nc, zip, false, newRawIO(nc)
		c.looped = d.polls != nil && c.rio != nil
		if d.interval == 0 && d.running.Load() {
			now := d.now()
			for s := range c.slots {
				if c.slots[s].id == 0 {
					c.issue(s, now, now)
				}
			}
			c.flushLocked()
		}
		c.mu.Unlock()
	}
}

// lost fails the calls in flight on nc, which broke with err, and takes
// it out of use.
func (c *wireConn) lost(nc net.Conn, err error) {
	nc.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nc != nc {
		return
	}
	c.nc, c.looped = nil, false
	c.rbuf = c.rbuf[:0]
	now := c.d.now()
	msg := "connection lost"
	if err != nil && !errors.Is(err, net.ErrClosed) {
		msg += ": " + err.Error()
	}
	for s := range c.slots {
		if sl := &c.slots[s]; sl.id != 0 {
			c.fail(s, proto.CodeUnavailable, msg, now)
		}
	}
}

// fail ends slot s's call in flight with an error of code; with c.mu held.
func (c *wireConn) fail(s int, code proto.Code, msg string, now time.Duration) {
	sl := &c.slots[s]
	sl.id = 0
	c.d.flying.Add(-1)
	kind := code.String()
	if c.tally != nil {
		c.tally.Failed(kind, now-sl.sent)
	}
	c.d.noteError(code, msg)
	c.next(s, now)
}

// read reads nc (through rio if it has one) until it fails, handling each
// batch of frames as it comes; or has its pacer read it.
func (c *wireConn) read(nc net.Conn, rio *rawIO) error {
	if c.d.polls != nil && rio != nil { // looped
		return c.handOver(c.d.polls[c.i%len(c.d.polls)], nc, rio)
	}
	if rio != nil {
		return rio.readLoop(c.free, func(n int) error { return c.got(nc, n) })
	}
	for {
		n, err := nc.Read(c.free())
		if n > 0 {
			if herr := c.got(nc, n); herr != nil {
				return herr
			}
		}
		if err != nil {
			return err
		}
	}
}

// free returns the room at the end of rbuf, growing it if it has none.
func (c *wireConn) free() []byte {
	if len(c.rbuf) == cap(c.rbuf) {
		c.grow(2 * cap(c.rbuf))
	}
	return c.rbuf[len(c.rbuf):cap(c.rbuf)]
}

// got handles the n bytes just read into the room at the end of rbuf.
func (c *wireConn) got(nc net.Conn, n int) error {
	full := len(c.rbuf)+n == cap(c.rbuf)
	c.rbuf = c.rbuf[:len(c.rbuf)+n]
	if err := c.handle(nc); err != nil {
		return err
	}
	c.fit(n, full)
	return nil
}

// grow gives rbuf room for n bytes, keeping what it holds.
func (c *wireConn) grow(n int) {
	b := make([]byte, len(c.rbuf), max(n, wireReadMin))
	copy(b, c.rbuf)
	c.rbuf = b
}

// fit sizes rbuf after a read of n bytes: larger while reads fill it,
// smaller once they have stayed under a quarter of it for a while.
func (c *wireConn) fit(n int, full bool) {
	switch {
	case full && cap(c.rbuf) < wireReadMax:
		c.grow(2 * cap(c.rbuf))
		c.small = 0
	case cap(c.rbuf) > wireReadMin && n < cap(c.rbuf)/4:
		if c.small++; c.small >= wireShrinkRuns {
			c.grow(max(cap(c.rbuf)/2, len(c.rbuf)))
			c.small = 0
		}
	default:
		c.small = 0
	}
}

// handle handles the whole frames in rbuf and keeps the rest at its
// start; then it writes what the frames made (the next calls of a closed
// loop, Pongs) in one write.
func (c *wireConn) handle(nc net.Conn) error {
	d := c.d
	now := d.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nc != nc {
		return net.ErrClosed
	}
	c.rebind()
	b := c.rbuf
	var f proto.Frame
	for {
		n, err := f.Decode(b, &d.lim)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		c.frame(&f, now)
		b = b[n:]
	}
	rest := copy(c.rbuf, b)
	c.rbuf = c.rbuf[:rest]
	if len(b) >= proto.HeaderSize {
		if need := f.Len(); need > cap(c.rbuf) {
			c.grow(need) // a frame larger than the buffer: room for all of it
		}
	}
	c.flushLocked()
	if c.goingAway && c.idle() {
		return errGoneAway // its calls are answered: redial
	}
	return nil
}

var errGoneAway = errors.New("rpcd: server sent go-away")

// idle reports whether no call is in flight on c; with c.mu held.
func (c *wireConn) idle() bool {
	for s := range c.slots {
		if c.slots[s].id != 0 {
			return false
		}
	}
	return true
}

// frame handles one frame from the server; with c.mu held.
func (c *wireConn) frame(f *proto.Frame, now time.Duration) {
	d := c.d
	switch f.Kind {
	case proto.KindResponse, proto.KindError:
		k := uint32(len(c.slots))
		s := int(f.ID % k)
		sl := &c.slots[s]
		if f.ID == 0 || sl.id != f.ID {
			return // a call that passed its deadline, answered late
		}
		if f.Kind == proto.KindError {
			code, msg := f.ErrorBody()
			c.fail(s, code, string(msg), now)
			return
		}
		reply := f.Payload
		if z := f.Flags.Compression(); z != proto.CompressionNone {
			var err error
			if c.zbuf, err = compression.Expand(c.zbuf[:0], reply, z, f.PayloadRoom(d.lim.MaxFrameSize)); err != nil {
				c.fail(s, proto.CodeDataLoss, "the server's reply: "+strings.TrimPrefix(err.Error(), "rpcd: "), now)
				return
			}
			reply = c.zbuf
		}
		sl.id = 0
		d.flying.Add(-1)
		bytes, err := sl.call.check(reply)
		if c.tally != nil {
			if err != nil {
				kind := classify(err)
				c.tally.Failed(kind, now-sl.sent)
				d.noteKind(kind, err.Error())
			} else {
				c.tally.Done(now-sl.sched, now-sl.sent, bytes)
			}
		}
		c.next(s, now)
	case proto.KindPing:
		c.wbuf = proto.AppendPong(c.wbuf, f.Payload)
	case proto.KindGoAway:
		c.goingAway = true
	}
}

// sweep fails the calls that pass their deadline unanswered, looking a
// few times per deadline, and tells the server of each.
func (d *wireDriver) sweep() {
	defer d.wg.Done()
	every := min(max(d.cfg.timeout/4, 10*time.Millisecond), time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	msg := "call " + d.route + ": deadline exceeded"
	for {
		select {
		case <-t.C:
		case <-d.ctx.Done():
			return
		}
		if d.flying.Load() == 0 {
			continue
		}
		now := d.now()
		for _, c := range d.cs {
			c.mu.Lock()
			for s := range c.slots {
				if sl := &c.slots[s]; sl.id != 0 && now-sl.sent > d.cfg.timeout {
					c.wbuf = proto.AppendCancel(c.wbuf, sl.id)
					c.fail(s, proto.CodeDeadlineExceeded, msg, now)
				}
			}
			c.flushLocked()
			c.mu.Unlock()
		}
	}
}

// wireDue is what a pacer's wheel holds: slot s of c, whose next call is
// due at the entry's time.
type wireDue struct {
	c *wireConn
	s int32
}

// pace is a pacer goroutine: every tick it makes the calls that came due
// in its wheel.
func (d *wireDriver) pace(w *loadgen.Wheel[wireDue]) {
	defer d.wg.Done()
	w.Pace(d.ctx.Done(), d.now, callDue)
}

// callDue makes the call of a pacer's entry, come due by now.
func callDue(e loadgen.Entry[wireDue], now time.Duration) {
	c := e.Item.c
	c.mu.Lock()
	c.due(int(e.Item.s), e.Due, now)
	c.mu.Unlock()
}

// runWire runs cfg's load (its defaults set) on the wire driver: a warm-up
// phase, then the measured one, each until its time is up or its calls
// have started, then until the calls in flight are answered. It returns
// what the measured phase made, with the first message of each kind of
// error in it.
func runWire(ctx context.Context, cfg Config, measured func(func() error) error) (loadgen.Result, map[string]string, error) {
	d, err := dialWire(ctx, driverConfig{addr: cfg.Addr, opts: cfg.Client, sc: cfg.Scenario,
		conns: cfg.Conns, inflight: cfg.Inflight, rate: cfg.Rate, timeout: cfg.Timeout})
	if err != nil {
		return loadgen.Result{}, nil, err
	}
	return runPhased(ctx, cfg, d, measured)
}
