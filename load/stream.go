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

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler/builtin"
)

// StreamConfig is a stream load for Stream: Streams streams at once, one
// per connection, each moving Size bytes to the server (Upload, into
// builtin.StreamSink) or from it (from builtin.StreamSource).
type StreamConfig struct {
	Addr   string         // the server: "host:port" or "unix:///path"
	Server string         // how the report names the server; Addr if empty
	Client client.Options // the options of every client, each of one connection

	Upload  bool  // send the bytes to the server; false has the server send them
	Streams int   // 1 if 0
	Size    int64 // bytes per stream; 256 MiB if 0 or less
}

// streamDefaultSize is StreamConfig.Size's default.
const streamDefaultSize = 256 << 20

// StreamReport is what Stream measured, with the field names of rpcd
// bench -scenario StreamUpload -json.
type StreamReport struct {
	Scenario      string  `json:"scenario"`              // StreamUploadName or StreamDownloadName
	Compression   string  `json:"compression,omitempty"` // what the streams asked for, where the server takes it
	Streams       int     `json:"streams"`
	Bytes         int64   `json:"bytes_per_stream"`
	Seconds       float64 `json:"seconds"`
	MiBps         float64 `json:"mib_per_sec"` // goodput, all streams together
	ServerHeap0   uint64  `json:"server_heap_inuse_before"`
	ServerHeapMax uint64  `json:"server_heap_inuse_peak"`
	ServerRSSMax  uint64  `json:"server_rss_peak"`
	ServerTarget  string  `json:"server"`

	secs float64 // Seconds, unrounded
}

// Stream moves cfg.Size bytes through each of cfg.Streams streams at once
// and checks the count at the other end, sampling the server's memory
// through builtin.Stats (Sys/Stats) while they run; it reports the goodput
// and the server's heap before and at its peak. The server must serve
// Sys/Stats (builtin.HandleStats) and the stream routes builtin.Register
// adds, as rpcd serve does.
func Stream(ctx context.Context, cfg StreamConfig) (*StreamReport, error) {
	switch {
	case cfg.Addr == "":
		return nil, errors.New("rpcd: load: no Addr")
	case cfg.Streams < 0:
		return nil, errors.New("rpcd: load: a negative Streams")
	}
	cfg.Streams = max(cfg.Streams, 1)
	if cfg.Size <= 0 {
		cfg.Size = streamDefaultSize
	}
	if cfg.Server == "" {
		cfg.Server = cfg.Addr
	}
	name := StreamDownloadName
	if cfg.Upload {
		name = StreamUploadName
	}
	size := cfg.Size
	clients, err := dialClients(ctx, cfg.Addr, cfg.Streams+1, cfg.Client)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	probe, movers := clients[0], clients[1:]

	var before builtin.StatsReply
	if err := probe.Call(ctx, builtin.Stats, nil, &before); err != nil {
		return nil, errorIn(builtin.Stats, err)
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
		go func() { errs <- moveStream(ctx, cl, cfg.Upload, size) }()
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
		return nil, firstErr
	}
	return &StreamReport{
		Scenario: name, Streams: len(movers), Bytes: size, Seconds: round(secs, 3),
		Compression: compressionName(cfg.Client),
		MiBps:       round(float64(size)*float64(len(movers))/(1<<20)/secs, 0),
		ServerHeap0: before.HeapInuse, ServerHeapMax: heapMax.Load(), ServerRSSMax: rssMax.Load(),
		ServerTarget: cfg.Server,
		secs:         secs,
	}, nil
}

// WriteText writes r as rpcd bench prints it: the server, then a line of
// what was moved, how fast, and the server's memory.
func (r *StreamReport) WriteText(w io.Writer) error {
	label := r.Scenario
	if r.Compression != "" {
		label += " (compressed: " + r.Compression + ")"
	}
	secs := r.secs
	if secs == 0 {
		secs = r.Seconds // a report decoded from JSON
	}
	_, err := w.Write(fmt.Appendf(nil, "server: %s\n%s: %d stream(s) of %d MiB in %.3fs: %.0f MiB/s; server heap in use %.1f MiB before, peak %.1f MiB; server RSS peak %.1f MiB\n",
		r.ServerTarget, label, r.Streams, r.Bytes>>20, secs, r.MiBps,
		float64(r.ServerHeap0)/(1<<20), float64(r.ServerHeapMax)/(1<<20), float64(r.ServerRSSMax)/(1<<20)))
	return err
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
