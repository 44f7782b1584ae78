package load

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/cputime"
	"github.com/rpcd/rpcd/internal/loadgen"
	"github.com/rpcd/rpcd/proto"
)

// ReplayCall is one call of a recording, as Replay makes it again: what the
// client sent, when and on which connection, and the answer the server
// gave, if the recording kept it.
type ReplayCall struct {
	At       time.Duration  // when it arrived, since the recording began
	Conn     uint64         // the recorded connection it came on
	Kind     proto.Kind     // proto.KindRequest, KindOneWay or KindPublish
	Route    string         // the route called; a Publish's topic
	Codec    proto.Codec    // the payload's codec, sent as recorded
	Metadata proto.Metadata // sent again as recorded (a Publish carries none)
	Deadline time.Duration  // the time its caller gave it (the Deadline field); 0 for none
	Payload  []byte

	// The recorded answer of a Request, which ReplayConfig.Compare checks
	// the new one against: Answered is false when the recording kept none.
	Answered bool
	Code     proto.Code // proto.CodeOK for a Response
	Answer   []byte     // a Response's payload; an Error's message
	// AnswerCodeOnly says the recorded payload is not the answer's own
	// (redacted, say): Compare checks the code alone.
	AnswerCodeOnly bool
}

// Recording is the calls Replay makes again.
type Recording struct {
	Name  string       // what the report calls it: the file's name, say
	Calls []ReplayCall // in the order they arrived
	// Length is how long the recording ran: one play's span, the next
	// loop's calls start after it. The last call's At if it is less.
	Length time.Duration
	// Skipped counts the frames clients sent that a replay does not make
	// again, by kind (proto.Kind's names: "Subscribe", "Cancel",
	// "StreamOpen", ...): the report lists them.
	Skipped map[string]int64
	// CutShort says the recording ends without its end (a recorder that
	// crashed): its calls are replayed as far as it goes.
	CutShort bool
}

// ReplayConfig is a replay for Replay: the calls of Recording made again
// at Addr, open loop, at their recorded times divided by Speed.
type ReplayConfig struct {
	// Addr is the server: "host:port" or "unix:///path" (not a service:
	// each recorded connection is one connection to one server).
	Addr string
	// Client is the options each connection's client is dialled with; its
	// Conns and Timeout are Replay's.
	Client    client.Options
	Recording *Recording
	// Speed divides the recorded times: 2 replays twice as fast. 1 if 0.
	Speed float64
	// Loops is how many times the recording is played, each play starting
	// Recording.Length after the one before; 0 is once, or, with
	// Duration, again and again until Duration.
	Loops int
	// Duration, if positive, stops the replay after that long: calls due
	// later are not made.
	Duration time.Duration
	// Timeout is the deadline of a call recorded without one (a call
	// recorded with one is given the same again) and the bound on
	// dialling; 5 s if 0.
	Timeout time.Duration

	// Compare checks each answer against the recorded one: its code, and
	// for answers that both succeeded, its payload (CompareIgnore).
	Compare bool
	// CompareIgnore names JSON fields a comparison ignores: a name without
	// a dot ("updated") at any depth, a dotted path ("user.updated") from
	// the payload's top, arrays passed through.
	CompareIgnore []string

	// ServerCPU, if not nil, is read before and after the replay for the
	// report's server CPU per call, as Config.ServerCPU.
	ServerCPU func() (time.Duration, error)
	// Progress, if not nil, is told of the replay as it goes: Starting once
	// every connection is dialled, then about once a second.
	Progress func(Progress)
}

// Replay dials a client for each connection of cfg.Recording and makes its
// calls again, open loop: each call when it is due, at its recorded time
// divided by Speed, whether or not earlier calls were answered, each
// connection's calls in their order. Requests go through
// Client.CallEncodedAsync, so that few goroutines keep many calls in
// flight; OneWay calls through NotifyEncoded, Publishes through
// PublishEncoded, with the recorded codec, metadata and deadline. It paces
// the calls on internal/loadgen's Wheel, the scheduler of every open loop,
// and returns a Report whose Replay part says what was replayed.
//
// Latency counts from when a call was due, not from when it was sent, so
// a replay that falls behind shows it; the report's CallsPerSec is the rate
// reached, Settings.Rate the rate asked (the recorded one × Speed), and
// RateShortfall says when it fell behind. An error means the replay could
// not be made (a connection not dialled, a recording with no call, ctx
// ended before it began).
func Replay(ctx context.Context, cfg ReplayConfig) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r, err := newReplayRun(cfg)
	if err != nil {
		return nil, err
	}
	opts := cfg.Client
	opts.Timeout = cfg.Timeout
	dctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	clients, err := dialClients(dctx, cfg.Addr, len(r.conns), opts)
	cancel()
	if err != nil {
		return nil, err
	}
	closeClients := func() {
		for _, cl := range clients {
			cl.Close()
		}
	}
	defer closeClients()
	for i, c := range r.conns {
		c.cl = clients[i]
	}
	if cfg.Progress != nil {
		cfg.Progress(Progress{Starting: true})
	}

	var srv0 time.Duration
	var srvErr error
	if cfg.ServerCPU != nil {
		srv0, srvErr = cfg.ServerCPU()
	}
	cpu0 := cputime.Process()
	r.play(ctx, closeClients)
	cpu := cputime.Process() - cpu0
	rep := r.report(cpu)
	if cfg.ServerCPU != nil && srvErr == nil && rep.Calls > 0 {
		if srv1, err := cfg.ServerCPU(); err == nil && srv1 >= srv0 {
			rep.ServerCPUPerCallUS = round(float64((srv1-srv0).Nanoseconds())/1e3/float64(rep.Calls), 3)
		}
	}
	return rep, nil
}

// withDefaults returns cfg with its defaults filled in, or an error for a
// field that cannot work.
func (cfg ReplayConfig) withDefaults() (ReplayConfig, error) {
	switch {
	case cfg.Addr == "":
		return cfg, errors.New("rpcd: load: no Addr")
	case client.IsService(cfg.Addr):
		return cfg, fmt.Errorf("rpcd: load: a replay dials one server, not the service %s", cfg.Addr)
	case cfg.Recording == nil || len(cfg.Recording.Calls) == 0:
		return cfg, errors.New("rpcd: load: the recording holds no call to replay")
	case cfg.Speed < 0 || math.IsNaN(cfg.Speed) || math.IsInf(cfg.Speed, 0):
		return cfg, fmt.Errorf("rpcd: load: Speed %v, want more than 0", cfg.Speed)
	case cfg.Loops < 0 || cfg.Duration < 0 || cfg.Timeout < 0:
		return cfg, errors.New("rpcd: load: a negative Loops, Duration or Timeout")
	}
	if cfg.Speed == 0 {
		cfg.Speed = 1
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultTimeout
	}
	return cfg, nil
}

// replayRun is one replay while it runs.
type replayRun struct {
	cfg    ReplayConfig
	conns  []*replayConn
	length time.Duration // one play, on the recording's clock
	loops  int           // plays; math.MaxInt until end
	end    time.Duration // on the replay's clock: calls due from then are not made; 0 for none
	rec    *loadgen.Recorder
	cmp    *comparer // nil without Compare

	start    time.Time
	left     atomic.Int64  // connections with calls still to make
	finished chan struct{} // closed once left is 0
	inflight sync.WaitGroup
	cut      atomic.Bool   // stopped early: failures from then on are the stop's
	cutAt    time.Duration // when, if cut
}

// replayConn is one recorded connection: its calls, the client that makes
// them, and what it made. The pacer of its wheel alone makes its calls
// (next, loop, ctxs, sent and the rest); mu guards its tally and first
// errors, which answers reach from the client's goroutines.
type replayConn struct {
	cl    *client.Client
	calls []*ReplayCall
	ctxs  []context.Context // a call's metadata, made at its first send
	wheel *loadgen.Wheel[*replayConn]

	next, loop int
	sent       map[string]int64 // by kind
	routes     map[string]int64
	lastSent   time.Duration
	late       time.Duration // summed over the calls sent
	maxLate    time.Duration

	mu    sync.Mutex
	tally *loadgen.Tally
	first map[string]string
}

// newReplayRun groups cfg's calls by connection, checks them, and readies
// the connections' tallies and wheels.
func newReplayRun(cfg ReplayConfig) (*replayRun, error) {
	rec := cfg.Recording
	r := &replayRun{cfg: cfg, length: rec.Length, loops: max(cfg.Loops, 1), finished: make(chan struct{})}
	if cfg.Loops == 0 && cfg.Duration > 0 {
		r.loops = math.MaxInt
	}
	r.end = cfg.Duration
	byConn := map[uint64]*replayConn{}
	for i := range rec.Calls {
		call := &rec.Calls[i]
		if err := checkReplayCall(call); err != nil {
			return nil, fmt.Errorf("rpcd: load: call %d of the recording (%s at %v): %w", i, call.Route, call.At, err)
		}
		r.length = max(r.length, call.At)
		c := byConn[call.Conn]
		if c == nil {
			c = &replayConn{sent: map[string]int64{}, routes: map[string]int64{}}
			byConn[call.Conn] = c
			r.conns = append(r.conns, c)
		}
		c.calls = append(c.calls, call)
	}
	r.length = max(r.length, time.Millisecond) // a recording of one instant plays as a millisecond
	r.rec = loadgen.NewRecorder(len(r.conns))
	wheels := make([]loadgen.Wheel[*replayConn], min(len(r.conns), runtime.GOMAXPROCS(0)))
	for i, c := range r.conns {
		slices.SortStableFunc(c.calls, func(a, b *ReplayCall) int { return cmp.Compare(a.At, b.At) })
		c.ctxs = make([]context.Context, len(c.calls))
		c.tally = r.rec.Tally(i)
		c.wheel = &wheels[i%len(wheels)]
	}
	if cfg.Compare {
		r.cmp = newComparer(cfg.CompareIgnore)
	}
	return r, nil
}

// checkReplayCall returns what makes call one a replay cannot make.
func checkReplayCall(call *ReplayCall) error {
	switch call.Kind {
	case proto.KindRequest, proto.KindOneWay, proto.KindPublish:
	default:
		return fmt.Errorf("a %v, not a call a replay makes (Request, OneWay, Publish)", call.Kind)
	}
	if call.At < 0 || call.Deadline < 0 {
		return errors.New("a negative time or deadline")
	}
	if err := call.Metadata.Validate(); err != nil {
		return err
	}
	var bad error
	call.Metadata.Range(func(k, _ []byte) bool {
		bad = proto.CheckMetadataKey(string(k))
		return bad == nil
	})
	return bad
}

// due returns when c's next call is due, on the replay's clock.
func (r *replayRun) due(c *replayConn) time.Duration {
	at := time.Duration(c.loop)*r.length + c.calls[c.next].At
	return time.Duration(float64(at) / r.cfg.Speed)
}

// over reports whether a call due at due is past the replay's end.
func (r *replayRun) over(due time.Duration) bool { return r.end > 0 && due >= r.end }

// play makes the calls, from a pacer per wheel, until every connection
// has made its own or ctx ends, then waits for the answers; closeClients
// cuts short the calls still waiting when ctx ends.
func (r *replayRun) play(ctx context.Context, closeClients func()) {
	r.start = time.Now()
	now := func() time.Duration { return time.Since(r.start) }
	r.left.Store(int64(len(r.conns)))
	for _, c := range r.conns {
		if due := r.due(c); r.over(due) {
			r.finish()
		} else {
			c.wheel.Add(c, due)
		}
	}
	stopProgress := func() {}
	if r.cfg.Progress != nil {
		stopProgress = r.rec.ReportEverySecond(r.start, func(p loadgen.Progress) {
			r.cfg.Progress(Progress{Elapsed: p.Elapsed, Calls: p.Calls, Errors: p.Errors})
		})
	}
	defer stopProgress()

	stop := make(chan struct{})
	var pacers sync.WaitGroup
	seen := map[*loadgen.Wheel[*replayConn]]bool{}
	for _, c := range r.conns {
		if w := c.wheel; !seen[w] {
			seen[w] = true
			pacers.Add(1)
			go func() {
				defer pacers.Done()
				w.Pace(stop, now, r.fire)
			}()
		}
	}
	select {
	case <-r.finished:
	case <-ctx.Done():
		r.stopEarly(now(), closeClients)
	}
	close(stop)
	pacers.Wait()

	answered := make(chan struct{})
	go func() {
		r.inflight.Wait()
		close(answered)
	}()
	select {
	case <-answered:
	case <-ctx.Done():
		r.stopEarly(now(), closeClients)
		<-answered
	}
}

// stopEarly marks the replay cut short at now and closes the clients,
// which fails the calls still waiting.
func (r *replayRun) stopEarly(now time.Duration, closeClients func()) {
	if r.cut.CompareAndSwap(false, true) {
		r.cutAt = now
	}
	closeClients()
}

// finish counts a connection that has made all its calls.
func (r *replayRun) finish() {
	if r.left.Add(-1) == 0 {
		close(r.finished)
	}
}

// fire is the pacer's: c's next call is due. It makes every call of c due
// by now, in one write (Client.Batch), and puts c back in its wheel at
// the time of the next.
func (r *replayRun) fire(e loadgen.Entry[*replayConn], now time.Duration) {
	c := e.Item
	if r.cut.Load() {
		return
	}
	c.cl.Batch(func() {
		for {
			due := r.due(c)
			if r.over(due) {
				r.finish()
				return
			}
			if due > now {
				c.wheel.Add(c, due)
				return
			}
			r.send(c, c.next, due)
			if c.next++; c.next == len(c.calls) {
				c.next = 0
				if c.loop++; c.loop == r.loops {
					r.finish()
					return
				}
			}
		}
	})
}

// send makes call i of c, due at due.
func (r *replayRun) send(c *replayConn, i int, due time.Duration) {
	call := c.calls[i]
	ctx := c.ctxs[i]
	if ctx == nil {
		ctx = context.Background()
		call.Metadata.Range(func(k, v []byte) bool {
			ctx = handler.WithMetadata(ctx, string(k), string(v))
			return true
		})
		c.ctxs[i] = ctx
	}
	var cancel context.CancelFunc = func() {}
	if call.Deadline > 0 && call.Kind != proto.KindPublish {
		ctx, cancel = context.WithTimeout(ctx, call.Deadline)
	}
	sent := time.Since(r.start)
	c.sent[call.Kind.String()]++
	c.routes[call.Route]++
	c.lastSent = sent
	late := max(sent-due, 0)
	c.late += late
	c.maxLate = max(c.maxLate, late)

	if call.Kind == proto.KindRequest {
		r.inflight.Add(1)
		c.cl.CallEncodedAsync(ctx, call.Codec, call.Route, call.Payload, nil, func(reply []byte, err error) {
			cancel()
			r.answered(c, call, due, sent, reply, err)
			r.inflight.Done()
		})
		return
	}
	var err error
	if call.Kind == proto.KindOneWay {
		err = c.cl.NotifyEncoded(ctx, call.Codec, call.Route, call.Payload)
	} else {
		err = c.cl.PublishEncoded(ctx, call.Route, call.Codec, call.Payload)
	}
	cancel()
	c.mu.Lock()
	if err != nil {
		c.failed(err, time.Since(r.start)-sent)
	} else {
		c.tally.Sent(len(call.Payload))
	}
	c.mu.Unlock()
}

// answered records the answer of a request due at due and sent at sent,
// and compares it with the recorded one.
func (r *replayRun) answered(c *replayConn, call *ReplayCall, due, sent time.Duration, reply []byte, err error) {
	if err != nil && r.cut.Load() {
		return // cut off by the replay's end, not a failure
	}
	now := time.Since(r.start)
	c.mu.Lock()
	if err != nil {
		c.failed(err, now-sent)
	} else {
		c.tally.Done(now-due, now-sent, len(call.Payload)+len(reply))
	}
	c.mu.Unlock()
	if r.cmp != nil && call.Answered {
		r.cmp.check(call, reply, err)
	}
}

// failed records a call of c that failed after busy; c.mu is held.
func (c *replayConn) failed(err error, busy time.Duration) {
	kind := classify(err)
	c.tally.Failed(kind, busy)
	if _, ok := c.first[kind]; !ok {
		if c.first == nil {
			c.first = map[string]string{}
		}
		c.first[kind] = err.Error()
	}
}
