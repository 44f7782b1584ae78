//go:build !race

package reactor_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/reactor"
)

// TestStream1GiB moves a 1 GiB file through a stream, client to server and
// server to client, over loopback, and checks its SHA-256 at the other
// end and that the heap stays bounded by the windows, not the file: the
// test process (server and client both) may not grow its heap in use by
// more than 32 MiB. It is left out under the race detector (too slow
// there) and under -short; run it with
//
//	go test -run TestStream1GiB -v ./reactor
func TestStream1GiB(t *testing.T) {
	if testing.Short() {
		t.Skip("1 GiB through a stream: not under -short")
	}
	const size = 1 << 30
	path := filepath.Join(t.TempDir(), "1gib")
	want := writeFile(t, path, size)

	reg := handler.NewRegistry()
	reg.HandleStream("File/Sum", func(ctx context.Context, s handler.Stream) error {
		h := sha256.New()
		if _, err := io.CopyBuffer(h, s, make([]byte, 256<<10)); err != nil {
			return err
		}
		_, err := s.Write([]byte(hex.EncodeToString(h.Sum(nil))))
		return err
	})
	reg.HandleStream("File/Get", func(ctx context.Context, s handler.Stream) error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.CopyBuffer(s, f, make([]byte, 256<<10))
		return err
	})
	s := start(t, reg, reactor.Options{})
	c := dial(t, s, client.Options{Conns: 1})

	t.Run("upload", func(t *testing.T) {
		st, err := c.OpenStream(ctxT(t), "File/Sum")
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		m := watchHeap(t)
		if n, err := io.CopyBuffer(st, f, make([]byte, 256<<10)); err != nil || n != size {
			t.Fatalf("upload: %d bytes, %v", n, err)
		}
		st.CloseSend()
		got, err := io.ReadAll(st)
		if err != nil {
			t.Fatal(err)
		}
		m.report(t, size)
		if string(got) != want {
			t.Fatalf("server's SHA-256 %s, want %s", got, want)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("download", func(t *testing.T) {
		st, err := c.OpenStream(ctxT(t), "File/Get")
		if err != nil {
			t.Fatal(err)
		}
		st.CloseSend()
		m := watchHeap(t)
		h := sha256.New()
		if n, err := io.CopyBuffer(h, st, make([]byte, 256<<10)); err != nil || n != size {
			t.Fatalf("download: %d bytes, %v", n, err)
		}
		m.report(t, size)
		if got := hex.EncodeToString(h.Sum(nil)); got != want {
			t.Fatalf("SHA-256 of the download %s, want %s", got, want)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// writeFile writes size seeded bytes to path and returns their SHA-256.
func writeFile(t *testing.T, path string, size int64) string {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyBuffer(io.MultiWriter(f, h), io.LimitReader(newSeeded(42), size), make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// heapWatch samples the heap in use while a transfer runs.
type heapWatch struct {
	start time.Time
	base  uint64
	peak  atomic.Uint64
	peakS atomic.Uint64 // runtime.MemStats.Sys at its peak
	stop  chan struct{}
	done  chan struct{}
}

func watchHeap(t *testing.T) *heapWatch {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := &heapWatch{start: time.Now(), base: ms.HeapInuse, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > m.peak.Load() {
				m.peak.Store(ms.HeapInuse)
			}
			if ms.Sys > m.peakS.Load() {
				m.peakS.Store(ms.Sys)
			}
			select {
			case <-m.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(m.halt)
	return m
}

func (m *heapWatch) halt() {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	<-m.done
}

// report logs time, goodput and the heap's peak, and fails past the bound.
func (m *heapWatch) report(t *testing.T, size int64) {
	d := time.Since(m.start)
	m.halt()
	grew := int64(m.peak.Load()) - int64(m.base)
	t.Logf("%d MiB in %v: %.0f MiB/s; heap in use %.1f MiB before, peak %.1f MiB (+%.1f MiB); Sys peak %.1f MiB",
		size>>20, d.Round(time.Millisecond), float64(size)/(1<<20)/d.Seconds(),
		float64(m.base)/(1<<20), float64(m.peak.Load())/(1<<20), float64(grew)/(1<<20), float64(m.peakS.Load())/(1<<20))
	if grew > 32<<20 {
		t.Errorf("the heap in use grew by %.1f MiB moving %d MiB; the windows (256 KiB a side) should bound it", float64(grew)/(1<<20), size>>20)
	}
}
