package etcd_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/discovery/etcd"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/etcdtest"
	"github.com/rpcd/rpcd/reactor"
)

// logRecord is a line a node logged, and when.
type logRecord struct {
	at  time.Time
	msg string
}

// recorder is a slog.Handler that keeps what is logged to it.
type recorder struct {
	mu   *sync.Mutex
	recs *[]logRecord
}

func newRecorder() recorder { return recorder{mu: new(sync.Mutex), recs: new([]logRecord)} }

func (r recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	*r.recs = append(*r.recs, logRecord{at: rec.Time, msg: rec.Message})
	r.mu.Unlock()
	return nil
}
func (r recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r recorder) WithGroup(string) slog.Handler      { return r }

// first returns the first record whose message is one of msgs, logged at
// or after since.
func (r recorder) first(since time.Time, msgs ...string) (logRecord, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range *r.recs {
		for _, m := range msgs {
			if rec.msg == m && !rec.at.Before(since) {
				return rec, true
			}
		}
	}
	return logRecord{}, false
}

// process is a node as an rpcd serve process has it: a server, and an
// etcd client of its own through which it registers.
type process struct {
	node
	log recorder
}

func startProcess(t *testing.T, endpoint, service string, ttl time.Duration) *process {
	t.Helper()
	p := &process{log: newRecorder()}
	reg := handler.NewRegistry()
	builtin.Register(reg)
	reg.HandleFunc("Count/Hit", func(_ context.Context, req, reply []byte) ([]byte, error) {
		p.hits.Add(1)
		return append(reply, req...), nil
	})
	p.srv = reactor.New(reg, reactor.Options{Loops: 1})
	if err := p.srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	p.addr = p.srv.Addr().String()
	cli, err := etcd.Connect(etcd.Config{Endpoints: []string{endpoint}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p.reg, err = etcd.Register(ctx, cli, service, client.Node{Addr: p.addr, Routes: []string{"Count/Hit"}}, etcd.RegisterOptions{TTL: ttl, Logger: slog.New(p.log)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.stop(t)
		cli.Close()
	})
	return p
}

// outagePlan returns how long etcd stays away in TestEtcdOutage and the
// nodes' lease TTL: $RPCD_ETCD_OUTAGE (as 60s) with the default TTL, or,
// by default, 5 s with a TTL of 2 s (etcd's shortest: it raises shorter
// ones), the same outage scaled down: more than twice the TTL.
func outagePlan(t *testing.T) (outage, ttl time.Duration) {
	if v := os.Getenv("RPCD_ETCD_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("RPCD_ETCD_OUTAGE=%q, want a duration such as 60s", v)
		}
		return d, etcd.DefaultTTL
	}
	return 5 * time.Second, 2 * time.Second
}

// TestEtcdOutage: three nodes registered in etcd, a client calling them
// through a Cluster; etcd stops for longer than the nodes' leases live
// (5 s against a TTL of 2 s by default; RPCD_ETCD_OUTAGE=60s for a minute
// against the default TTL of 10 s), then starts again, and a fourth node
// joins. Each node logs within 2 s of etcd's return that its registration
// is kept; no call fails, before, during or after; etcd never deletes a
// key (its history from before the outage shows no delete), so the client
// never loses a node; the node that joined after takes its share, not all.
func TestEtcdOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("stops etcd for seconds")
	}
	outage, ttl := outagePlan(t)
	t.Logf("etcd away for %v; lease TTL %v", outage, ttl)
	srv := etcdtest.StartServer(t)
	ps := []*process{startProcess(t, srv.Endpoint, "echo", ttl), startProcess(t, srv.Endpoint, "echo", ttl), startProcess(t, srv.Endpoint, "echo", ttl)}
	watcher := etcdClient(t, srv.Endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), outage+2*time.Minute)
	defer cancel()
	before, err := watcher.Get(ctx, etcd.Prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	k, err := client.DialService(ctx, "etcd://"+srv.Endpoint+"/echo", client.ServiceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	waitFor(t, "three nodes in the client", func() bool { return len(k.Nodes()) == 3 })

	// Load: four callers, each a call about every 2 ms.
	var (
		ok, failed atomic.Int64
		mu         sync.Mutex
		errs       []string
		fewest     atomic.Int64 // the fewest nodes the client had
		stop       = make(chan struct{})
		wg         sync.WaitGroup
	)
	fewest.Store(3)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
				cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := k.CallRaw(cctx, "Count/Hit", []byte("x"), nil)
				cancel()
				if err != nil {
					failed.Add(1)
					mu.Lock()
					if len(errs) < 5 {
						errs = append(errs, err.Error())
					}
					mu.Unlock()
				} else {
					ok.Add(1)
				}
				if n := int64(len(k.Nodes())); n < fewest.Load() {
					fewest.Store(n)
				}
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)

	srv.Stop()
	stoppedAt := time.Now()
	time.Sleep(outage)
	srv.Restart()
	backAt := time.Now()
	t.Logf("etcd back after %v; %d calls succeeded so far, %d failed", backAt.Sub(stoppedAt).Round(time.Millisecond), ok.Load(), failed.Load())
	late := startProcess(t, srv.Endpoint, "echo", ttl) // a node that joins once etcd is back

	time.Sleep(3 * time.Second)
	for i, p := range ps {
		rec, ok := p.log.first(stoppedAt, "rpcd: etcd registration kept", "rpcd: registered again")
		took := rec.at.Sub(backAt)
		switch {
		case !ok:
			t.Errorf("node %d logged no renewal within 3s of etcd's return", i)
		case took > 2*time.Second:
			t.Errorf("node %d: %q %v after etcd's return, want within 2s", i, rec.msg, took)
		default:
			t.Logf("node %d: %q %v after etcd's return", i, rec.msg, took.Round(time.Millisecond))
		}
	}
	waitFor(t, "the late node in the client", func() bool { return len(k.Nodes()) == 4 })
	// Past the lease etcd revived for each node (its TTL, and the election
	// time, from the return), and past the TTL of any lease it granted.
	time.Sleep(2*ttl + 2*time.Second - time.Since(backAt))
	base := make([]int64, 4)
	for i, p := range append(ps, late) {
		base[i] = p.hits.Load()
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()

	t.Logf("%d calls succeeded, %d failed; the client had at least %d nodes", ok.Load(), failed.Load(), fewest.Load())
	if failed.Load() != 0 {
		t.Errorf("%d calls failed, first: %v", failed.Load(), errs)
	}
	if fewest.Load() < 3 {
		t.Errorf("the client was down to %d nodes", fewest.Load())
	}
	// Over the last second, each node took a share of the calls.
	var total int64
	shares := make([]int64, 4)
	for i, p := range append(ps, late) {
		shares[i] = p.hits.Load() - base[i]
		total += shares[i]
	}
	t.Logf("calls per node over the last second: %v", shares)
	for i, n := range shares {
		if n < total/8 {
			t.Errorf("node %d took %d of the last second's %d calls", i, n, total)
		}
	}

	// etcd's history since before the outage: puts (the late node's), no
	// delete.
	now, err := watcher.Get(ctx, etcd.Prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(now.Kvs) != 4 {
		t.Errorf("%d keys in etcd at the end, want 4", len(now.Kvs))
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	deletes := 0
	history := watcher.Watch(wctx, etcd.Prefix, clientv3.WithPrefix(), clientv3.WithRev(before.Header.Revision+1))
read:
	for resp := range history {
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete {
				deletes++
				t.Logf("etcd deleted %s at revision %d", strings.TrimPrefix(string(ev.Kv.Key), etcd.Prefix), ev.Kv.ModRevision)
			}
			if ev.Kv.ModRevision >= now.Header.Revision {
				break read
			}
		}
	}
	if deletes != 0 {
		t.Errorf("etcd deleted %d keys of live nodes", deletes)
	}
}
