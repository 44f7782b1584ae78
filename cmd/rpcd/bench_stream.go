package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler/builtin"
)

// The stream goodput scenarios of bench: -c streams at once, one per
// connection, each moving -size bytes to the server (StreamUpload, into
// Bench/StreamSink) or from it (StreamDownload, from Bench/StreamSource),
// with the server's memory sampled through Sys/Stats while they run.
const (
	streamUploadScenario   = "StreamUpload"
	streamDownloadScenario = "StreamDownload"
	streamDefaultSize      = 256 << 20
)

// isStreamScenario reports whether name is a stream scenario.
func isStreamScenario(name string) bool {
	return strings.EqualFold(name, streamUploadScenario) || strings.EqualFold(name, streamDownloadScenario)
}

// streamReport is what a stream run measured.
type streamReport struct {
	Scenario      string  `json:"scenario"`
	Compression   string  `json:"compression,omitempty"` // -compress: what the streams settle, where the server takes it
	Streams       int     `json:"streams"`
	Bytes         int64   `json:"bytes_per_stream"`
	Seconds       float64 `json:"seconds"`
	MiBps         float64 `json:"mib_per_sec"`
	ServerHeap0   uint64  `json:"server_heap_inuse_before"`
	ServerHeapMax uint64  `json:"server_heap_inuse_peak"`
	ServerRSSMax  uint64  `json:"server_rss_peak"`
	ServerTarget  string  `json:"server"`
}

// benchStream runs a stream scenario against the server of f (or a child
// server) and prints its report.
func (c *cli) benchStream(f *benchFlags) error {
	upload := strings.EqualFold(f.scenario, streamUploadScenario)
	name := streamDownloadScenario
	if upload {
		name = streamUploadScenario
	}
	size := int64(f.size)
	if size <= 0 {
		size = streamDefaultSize
	}
	if f.conns < 1 {
		return usagef("-c is %d, want 1 or more", f.conns)
	}
	ctx, stop := c.interruptible()
	defer stop()
	t, stopTarget, err := c.loadTarget(ctx, f.addr)
	if err != nil {
		return err
	}
	defer stopTarget()
	addr, target := t.addr, t.String()
	clients, err := c.dialBench(ctx, addr, f.conns+1, f)
	if err != nil {
		return err
	}
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	probe, movers := clients[0], clients[1:]

	var before builtin.StatsReply
	if err := probe.Call(ctx, builtin.Stats, nil, &before); err != nil {
		return errorIn(builtin.Stats, err)
	}
	var heapMax, rssMax atomic.Uint64
	heapMax.Store(before.HeapInuse)
	rssMax.Store(before.RSS)
	sampling, stopSampling := context.WithCancel(ctx)
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for sampling.Err() == nil {
			var st builtin.StatsReply
			if probe.Call(sampling, builtin.Stats, nil, &st) == nil {
				heapMax.Store(max(heapMax.Load(), st.HeapInuse))
				rssMax.Store(max(rssMax.Load(), st.RSS))
			}
			select {
			case <-sampling.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()

	began := time.Now()
	errs := make(chan error, len(movers))
	for _, cl := range movers {
		go func() { errs <- moveStream(ctx, cl, upload, size) }()
	}
	var firstErr error
	for range movers {
		if err := <-errs; err != nil && firstErr == nil {
			firstErr = err
		}
	}
	secs := time.Since(began).Seconds()
	stopSampling()
	sampler.Wait()
	if firstErr != nil {
		return firstErr
	}
	rep := streamReport{
		Scenario: name, Streams: len(movers), Bytes: size, Seconds: round(secs, 3),
		Compression: compressedName(f.compress.name),
		MiBps:       round(float64(size)*float64(len(movers))/(1<<20)/secs, 0),
		ServerHeap0: before.HeapInuse, ServerHeapMax: heapMax.Load(), ServerRSSMax: rssMax.Load(),
		ServerTarget: target,
	}
	if f.jsonOut {
		b, _ := json.MarshalIndent(rep, "", "  ")
		return c.write(append(b, '\n'))
	}
	label := name
	if rep.Compression != "" {
		label += " (compressed: " + rep.Compression + ")"
	}
	return c.write(fmt.Appendf(nil, "server: %s\n%s: %d stream(s) of %d MiB in %.3fs: %.0f MiB/s; server heap in use %.1f MiB before, peak %.1f MiB; server RSS peak %.1f MiB\n",
		target, label, rep.Streams, size>>20, secs, rep.MiBps,
		float64(rep.ServerHeap0)/(1<<20), float64(rep.ServerHeapMax)/(1<<20), float64(rep.ServerRSSMax)/(1<<20)))
}

// moveStream moves size bytes through one stream on cl and checks the
// count at the other end.
func moveStream(ctx context.Context, cl *client.Client, upload bool, size int64) error {
	if upload {
		st, err := cl.OpenStream(ctx, builtin.StreamSink)
		if err != nil {
			return err
		}
		if err := builtin.WritePattern(st, size); err != nil {
			return errorIn(builtin.StreamSink, err)
		}
		if err := st.CloseSend(); err != nil {
			return err
		}
		reply, err := io.ReadAll(st)
		if err != nil {
			return errorIn(builtin.StreamSink, err)
		}
		if len(reply) != 8 || int64(binary.BigEndian.Uint64(reply)) != size {
			return fmt.Errorf("rpcd: %s counted %x, want %d bytes", builtin.StreamSink, reply, size)
		}
		return st.Close()
	}
	st, err := cl.OpenStream(ctx, builtin.StreamSource)
	if err != nil {
		return err
	}
	if _, err := st.Write(binary.BigEndian.AppendUint64(nil, uint64(size))); err != nil {
		return err
	}
	if err := st.CloseSend(); err != nil {
		return err
	}
	n, err := io.CopyBuffer(io.Discard, st, make([]byte, 64<<10))
	if err != nil {
		return errorIn(builtin.StreamSource, err)
	}
	if n != size {
		return fmt.Errorf("rpcd: %s sent %d bytes, want %d", builtin.StreamSource, n, size)
	}
	return st.Close()
}
