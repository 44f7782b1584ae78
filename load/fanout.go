package load

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/internal/cputime"
)

// FanOutConfig is a publish/subscribe load for FanOut: one publisher,
// Subscribers subscribers on connections of their own, every message to
// all of them.
type FanOutConfig struct {
	Addr   string         // the server: "host:port" or "unix:///path"
	Server string         // how the report names the server; Addr if empty
	Client client.Options // the options of every client, each of one connection

	Subscribers int           // 100 if 0
	Size        int           // message bytes: at least 16, the sequence number and the time sent
	Duration    time.Duration // how long to measure; 5 s if 0
	Warmup      time.Duration // how long to publish before measuring; none if 0 or less
	Timeout     time.Duration // bound on subscribing each subscriber; 5 s if 0
}

// fanOutTopic is the topic FanOut publishes on.
const fanOutTopic = "bench.fanout"

// fanOutWindow is how far the publisher may run ahead of the slowest
// subscriber, in messages: enough to keep the server busy, too little
// for any queue to fill and drop.
const fanOutWindow = 512

// FanOutReport is what FanOut measured, with the field names of rpcd bench
// -scenario FanOut -json.
type FanOutReport struct {
	Scenario     string  `json:"scenario"` // FanOutName
	Subscribers  int     `json:"subscribers"`
	Size         int     `json:"size"`
	Seconds      float64 `json:"seconds"`
	Published    uint64  `json:"published"`
	Delivered    uint64  `json:"delivered"`
	Lost         uint64  `json:"lost"`
	PublishedPS  float64 `json:"published_per_sec"`
	DeliveredPS  float64 `json:"delivered_per_sec"`
	P50us        float64 `json:"p50_us"` // from publishing to receipt
	P99us        float64 `json:"p99_us"`
	MaxUs        float64 `json:"max_us"`
	CPUPerMsgUs  float64 `json:"cpu_per_delivered_us"` // this process's CPU per message delivered
	ServerTarget string  `json:"server"`

	secs   float64       // Seconds, unrounded
	warmup time.Duration // FanOutConfig.Warmup
}

// fanOutSub is one subscriber's tally.
type fanOutSub struct {
	received atomic.Uint64 // every message, for the publisher's window
	measured atomic.Uint64 // those published after the warm-up
	mu       sync.Mutex
	lat      *hdrhistogram.Histogram // µs, from publish to receipt, after the warm-up
}

// FanOut subscribes cfg.Subscribers clients to one topic and publishes to
// it from another client as fast as the slowest subscriber keeps up (at
// most 512 messages ahead of it), for cfg.Duration after cfg.Warmup, and
// reports the messages published and delivered, those lost, and the
// latency from publishing to receipt.
func FanOut(ctx context.Context, cfg FanOutConfig) (*FanOutReport, error) {
	switch {
	case cfg.Addr == "":
		return nil, errors.New("rpcd: load: no Addr")
	case cfg.Subscribers < 0 || cfg.Duration < 0:
		return nil, errors.New("rpcd: load: a negative Subscribers or Duration")
	}
	if cfg.Subscribers == 0 {
		cfg.Subscribers = 100
	}
	if cfg.Duration == 0 {
		cfg.Duration = defaultDuration
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultTimeout
	}
	if cfg.Server == "" {
		cfg.Server = cfg.Addr
	}
	size := max(cfg.Size, 16) // room for the sequence number and the timestamp
	clients, err := dialClients(ctx, cfg.Addr, cfg.Subscribers+1, cfg.Client)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	pub, subClients := clients[0], clients[1:]
	subs := make([]*fanOutSub, cfg.Subscribers)
	var measureFrom atomic.Uint64 // sequence numbers above it are measured
	measureFrom.Store(1<<64 - 1)
	for i, cl := range subClients {
		s := &fanOutSub{lat: hdrhistogram.New(1, 60_000_000, 3)}
		subs[i] = s
		sctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		_, err := cl.SubscribeFunc(sctx, fanOutTopic, func(m client.Message) {
			if binary.BigEndian.Uint64(m.Payload) > measureFrom.Load() {
				sent := int64(binary.BigEndian.Uint64(m.Payload[8:]))
				s.mu.Lock()
				_ = s.lat.RecordValue(max(1, (time.Now().UnixNano()-sent)/1000))
				s.mu.Unlock()
				s.measured.Add(1)
			}
			s.received.Add(1)
		})
		cancel()
		if err != nil {
			return nil, errorIn(fmt.Sprintf("subscriber %d", i), err)
		}
	}
	minReceived := func() uint64 {
		m := subs[0].received.Load()
		for _, s := range subs[1:] {
			m = min(m, s.received.Load())
		}
		return m
	}
	payload := make([]byte, size)
	var published uint64
	publish := func(until time.Time) error {
		for time.Now().Before(until) && ctx.Err() == nil {
			for published-minReceived() >= fanOutWindow {
				if time.Now().After(until) || ctx.Err() != nil {
					return nil
				}
				time.Sleep(50 * time.Microsecond)
			}
			for range 16 {
				published++
				binary.BigEndian.PutUint64(payload, published)
				binary.BigEndian.PutUint64(payload[8:], uint64(time.Now().UnixNano()))
				if err := pub.PublishRaw(ctx, fanOutTopic, payload); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := publish(time.Now().Add(cfg.Warmup)); err != nil {
		return nil, err
	}
	// The measured part: messages published from here on.
	startPub := published
	measureFrom.Store(startPub)
	cpu0 := cputime.Process()
	began := time.Now()
	if err := publish(began.Add(cfg.Duration)); err != nil {
		return nil, err
	}
	// Let the messages on their way arrive, for a bounded time.
	for wait := time.Now().Add(2 * time.Second); minReceived() < published && time.Now().Before(wait); {
		time.Sleep(time.Millisecond)
	}
	secs := time.Since(began).Seconds()
	cpu := cputime.Process() - cpu0
	rep := &FanOutReport{Scenario: FanOutName, Subscribers: cfg.Subscribers, Size: size, Seconds: round(secs, 2), ServerTarget: cfg.Server,
		secs: secs, warmup: cfg.Warmup}
	rep.Published = published - startPub
	all := hdrhistogram.New(1, 60_000_000, 3)
	for _, s := range subs {
		rep.Delivered += s.measured.Load()
		s.mu.Lock()
		all.Merge(s.lat)
		s.mu.Unlock()
	}
	rep.Lost = rep.Published*uint64(cfg.Subscribers) - rep.Delivered
	rep.PublishedPS = round(float64(rep.Published)/secs, 0)
	rep.DeliveredPS = round(float64(rep.Delivered)/secs, 0)
	rep.P50us, rep.P99us, rep.MaxUs = float64(all.ValueAtQuantile(50)), float64(all.ValueAtQuantile(99)), float64(all.Max())
	if rep.Delivered > 0 {
		rep.CPUPerMsgUs = round(cpu.Seconds()*1e6/float64(rep.Delivered), 2)
	}
	return rep, nil
}

// WriteText writes r as rpcd bench prints it: the server, then a line of
// what was run and one of what it measured. The warm-up it names is the
// one FanOut ran; a report decoded from JSON does not carry it.
func (r *FanOutReport) WriteText(w io.Writer) error {
	secs := r.secs
	if secs == 0 {
		secs = r.Seconds // a report decoded from JSON
	}
	b := fmt.Appendf(nil, "server: %s\n%s: 1 publisher, %d subscribers, %d-byte messages; %.1fs after %v warm-up\n"+
		"published %d (%.0f/s), delivered %d (%.0f/s), lost %d; latency p50 %.0f µs, p99 %.0f µs, max %.0f µs; this process %.2f µs CPU per delivered message\n",
		r.ServerTarget, FanOutName, r.Subscribers, r.Size, secs, r.warmup,
		r.Published, r.PublishedPS, r.Delivered, r.DeliveredPS, r.Lost, r.P50us, r.P99us, r.MaxUs, r.CPUPerMsgUs)
	_, err := w.Write(b)
	return err
}
