package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/internal/loadgen"
)

// fanOutScenario is bench's publish/subscribe scenario: one publisher,
// -subs subscribers on connections of their own, every message to all.
const fanOutScenario = "FanOut"

// fanOutWindow is how far the publisher may run ahead of the slowest
// subscriber, in messages: enough to keep the server busy, too little
// for any queue to fill and drop.
const fanOutWindow = 512

// fanOutReport is what a fan-out run measured.
type fanOutReport struct {
	Scenario     string  `json:"scenario"`
	Subscribers  int     `json:"subscribers"`
	Size         int     `json:"size"`
	Seconds      float64 `json:"seconds"`
	Published    uint64  `json:"published"`
	Delivered    uint64  `json:"delivered"`
	Lost         uint64  `json:"lost"`
	PublishedPS  float64 `json:"published_per_sec"`
	DeliveredPS  float64 `json:"delivered_per_sec"`
	P50us        float64 `json:"p50_us"`
	P99us        float64 `json:"p99_us"`
	MaxUs        float64 `json:"max_us"`
	CPUPerMsgUs  float64 `json:"cpu_per_delivered_us"`
	ServerTarget string  `json:"server"`
}

// fanOutSub is one subscriber's tally.
type fanOutSub struct {
	received atomic.Uint64 // every message, for the publisher's window
	measured atomic.Uint64 // those published after the warm-up
	mu       sync.Mutex
	lat      *hdrhistogram.Histogram // µs, from publish to receipt, after the warm-up
}

// benchFanOut runs the FanOut scenario against the server of f (or a
// child server) and prints its report.
func (c *cli) benchFanOut(f *benchFlags) error {
	if f.subs < 1 {
		return usagef("-subs is %d, want 1 or more", f.subs)
	}
	if f.duration <= 0 {
		return usagef("-d is %v, want more than 0", f.duration)
	}
	f.size = max(f.size, 16) // room for the sequence number and the timestamp
	ctx, stop := c.interruptible()
	defer stop()
	t, stopTarget, err := c.loadTarget(ctx, f.addr, "-max-conns", strconv.Itoa(f.subs+16))
	if err != nil {
		return err
	}
	defer stopTarget()
	addr, target := t.addr, t.String()
	clients, err := c.dialBench(ctx, addr, f.subs+1, f)
	if err != nil {
		return err
	}
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	pub, subClients := clients[0], clients[1:]
	subs := make([]*fanOutSub, f.subs)
	var measureFrom atomic.Uint64 // sequence numbers above it are measured
	measureFrom.Store(1<<64 - 1)
	for i, cl := range subClients {
		s := &fanOutSub{lat: hdrhistogram.New(1, 60_000_000, 3)}
		subs[i] = s
		sctx, cancel := context.WithTimeout(ctx, f.timeout)
		_, err := cl.SubscribeFunc(sctx, "bench.fanout", func(m client.Message) {
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
			return errorIn(fmt.Sprintf("subscriber %d", i), err)
		}
	}
	minReceived := func() uint64 {
		m := subs[0].received.Load()
		for _, s := range subs[1:] {
			m = min(m, s.received.Load())
		}
		return m
	}
	payload := make([]byte, f.size)
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
				if err := pub.PublishRaw(ctx, "bench.fanout", payload); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := publish(time.Now().Add(f.warmup)); err != nil {
		return err
	}
	// The measured part: messages published from here on.
	startPub := published
	measureFrom.Store(startPub)
	cpu0 := loadgen.ProcessCPU()
	began := time.Now()
	if err := publish(began.Add(f.duration)); err != nil {
		return err
	}
	// Let the messages on their way arrive, for a bounded time.
	for wait := time.Now().Add(2 * time.Second); minReceived() < published && time.Now().Before(wait); {
		time.Sleep(time.Millisecond)
	}
	secs := time.Since(began).Seconds()
	cpu := loadgen.ProcessCPU() - cpu0
	rep := fanOutReport{Scenario: fanOutScenario, Subscribers: f.subs, Size: f.size, Seconds: round(secs, 2), ServerTarget: target}
	rep.Published = published - startPub
	all := hdrhistogram.New(1, 60_000_000, 3)
	for _, s := range subs {
		rep.Delivered += s.measured.Load()
		s.mu.Lock()
		all.Merge(s.lat)
		s.mu.Unlock()
	}
	rep.Lost = rep.Published*uint64(f.subs) - rep.Delivered
	rep.PublishedPS = round(float64(rep.Published)/secs, 0)
	rep.DeliveredPS = round(float64(rep.Delivered)/secs, 0)
	rep.P50us, rep.P99us, rep.MaxUs = float64(all.ValueAtQuantile(50)), float64(all.ValueAtQuantile(99)), float64(all.Max())
	if rep.Delivered > 0 {
		rep.CPUPerMsgUs = round(cpu.Seconds()*1e6/float64(rep.Delivered), 2)
	}
	if f.jsonOut {
		b, _ := json.MarshalIndent(rep, "", "  ")
		return c.write(append(b, '\n'))
	}
	return c.write(fmt.Appendf(nil, "server: %s\n%s: 1 publisher, %d subscribers, %d-byte messages; %.1fs after %v warm-up\n"+
		"published %d (%.0f/s), delivered %d (%.0f/s), lost %d; latency p50 %.0f µs, p99 %.0f µs, max %.0f µs; this process %.2f µs CPU per delivered message\n",
		target, fanOutScenario, f.subs, f.size, secs, f.warmup,
		rep.Published, rep.PublishedPS, rep.Delivered, rep.DeliveredPS, rep.Lost, rep.P50us, rep.P99us, rep.MaxUs, rep.CPUPerMsgUs))
}
