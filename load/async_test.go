package load

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/internal/loadgen"
	"github.com/rpcd/rpcd/reactor"
)

// TestAsyncDriverGoroutines: the client driver keeps 64 callers' calls in
// flight on 2 connections without a goroutine per caller: the process
// runs no more goroutines during the phase than the clients' and pacers'
// own, where a goroutine per caller would add 64.
func TestAsyncDriverGoroutines(t *testing.T) {
	addr := serveBuiltin(t)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	sc, _ := LookupScenario("EchoPacket16")
	d, err := dialAsync(ctx, driverConfig{addr: addr, sc: sc, conns: 2, inflight: 32, timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	before := runtime.NumGoroutine()
	rec := loadgen.NewRecorder(2)
	d.start(rec, 0)
	most := 0
	for range 20 {
		time.Sleep(5 * time.Millisecond)
		most = max(most, runtime.NumGoroutine())
	}
	d.stop()
	if calls, errs := rec.Progress(); calls == 0 || errs != 0 {
		t.Fatalf("%d calls, %d errors; want some and none", calls, errs)
	}
	if most > before+8 {
		t.Errorf("%d goroutines while 64 callers called, %d before: a goroutine per caller?", most, before)
	}
}

// TestAsyncDriverFailures: a call the client fails before sending it
// (here a route it refuses) completes on the goroutine that started it;
// its caller tries again at its pacer's next tick, not at once, so that a
// closed loop neither recurses through done functions nor spins. And when
// the server goes away in the middle of a run, the callers wait for a
// connection (a closed loop's clients are WaitForReady) until their
// deadlines, those calls are counted, and the run ends on time.
func TestAsyncDriverFailures(t *testing.T) {
	reg := handler.NewRegistry()
	builtin.Register(reg)
	srv := reactor.New(reg, reactor.Options{Loops: 1})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	const inflight, run = 8, 400 * time.Millisecond

	r, err := Bench(ctx, Config{Addr: addr, Scenario: RawRoute("No Such Route", Pattern(8), false), Conns: 1, Inflight: inflight, Duration: run})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a refused route: errors %v", r.ErrorsBy)
	// At most a failure per caller a tick, twice over for the runtime's
	// lateness; a caller that tried again at once would make millions, or
	// overflow its stack.
	if most := int64(inflight) * int64(run/loadgen.WheelTick) * 2; r.Errors == 0 || r.Errors != r.ErrorsBy["invalid argument"] || r.Errors > most {
		t.Errorf("errors %v in %v from %d callers: want only invalid argument, at most one a tick each (%d)", r.ErrorsBy, run, inflight, most)
	}

	go func() {
		time.Sleep(150 * time.Millisecond)
		sctx, scancel := context.WithTimeout(context.Background(), time.Second)
		defer scancel()
		srv.Shutdown(sctx)
	}()
	sc, _ := LookupScenario("EchoPacket16")
	began := time.Now()
	r, err = Bench(ctx, Config{Addr: addr, Scenario: sc, Conns: 1, Inflight: inflight, Duration: run, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	t.Logf("the server gone: %d calls, errors %v in %v", r.Calls, r.ErrorsBy, took)
	if first := r.FirstErrors["deadline exceeded"]; r.Calls == 0 || r.ErrorsBy["deadline exceeded"] == 0 || !strings.Contains(first, "while waiting to send it") {
		t.Errorf("%d calls, errors %v, first %q; want calls answered before the server went, and ones that waited for a connection after", r.Calls, r.ErrorsBy, first)
	}
	if took > run+5*time.Second {
		t.Errorf("the run took %v, asked for %v", took, run)
	}
}

// TestPipeline: in an open loop a caller's calls go at their times behind
// those still unanswered, up to the driver's depth and no further. A
// server that holds every call has exactly depth of them in flight from
// the one caller, 1 at depth 1; once it lets them go, the calls that came
// due meanwhile go at once, each counted late, and none fails.
func TestPipeline(t *testing.T) {
	for _, depth := range []int{1, 3} {
		t.Run(strconv.Itoa(depth), func(t *testing.T) {
			reg := handler.NewRegistry()
			builtin.Register(reg)
			var held, most atomic.Int32
			release := make(chan struct{})
			reg.HandleFunc("Test/Hold", func(_ context.Context, req, reply []byte) ([]byte, error) {
				n := held.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				<-release
				held.Add(-1)
				return append(reply, req...), nil
			}, handler.Blocking())
			srv := reactor.New(reg, reactor.Options{Loops: 1})
			if err := srv.Start("127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
			defer srv.Shutdown(context.Background())
			opened := false
			defer func() {
				if !opened {
					close(release) // before the shutdown, which waits for the handlers
				}
			}()

			ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
			defer cancel()
			d, err := dialAsync(ctx, driverConfig{addr: srv.Addr().String(), sc: RawRoute("Test/Hold", Pattern(8), true),
				conns: 1, inflight: 1, rate: 200, depth: depth, timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer d.close()
			rec := loadgen.NewRecorder(1)
			d.start(rec, 0)
			for end := time.Now().Add(2 * time.Second); held.Load() < int32(depth) && time.Now().Before(end); {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond) // 20 more calls due: none may go
			if got := most.Load(); got != int32(depth) {
				t.Errorf("%d calls held at once, want %d (the depth)", got, depth)
			}
			close(release)
			opened = true
			time.Sleep(100 * time.Millisecond) // the late calls go, and new ones at their times
			d.stop()
			if calls, errs := rec.Progress(); calls < 20 || errs != 0 {
				t.Errorf("%d calls, %d errors; want the late ones made (20 or more) and none failed", calls, errs)
			}
		})
	}
}
