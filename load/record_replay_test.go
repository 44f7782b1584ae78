package load

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/rpcd/rpcd/record"
)

// TestRecordReplay is the Done-means end to end. A known mix
// (three routes 60/30/10 over four connections, with a burst: the
// generated one, made by a replay) is recorded from a live server, with
// its answers; the recording's summary reproduces the mix; replayed at 1×
// into another server it reaches the recorded rate ±5 % with the same
// proportions, each connection's calls in order with their metadata and
// deadlines; at 4× four times the rate, or it says it fell behind; and
// against a server changed to answer one route differently, -compare
// reports exactly that route's calls.
func TestRecordReplay(t *testing.T) {
	live := startMix(t, false)
	path := filepath.Join(t.TempDir(), "mix.rec")
	rec, addr, stop := recordFrom(t, live, path)
	replayMix(t, addr, 1, false)
	stop()
	stats, err := rec.Stop()
	if err != nil || stats.Lost != 0 || stats.Calls != mixSteady+mixBurst {
		t.Fatalf("recorded %+v, %v; want the %d calls, none lost", stats, err, mixSteady+mixBurst)
	}

	rd, err := record.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := record.Summarize(rd)
	rd.Close()
	if err != nil {
		t.Fatal(err)
	}
	total := int64(mixSteady + mixBurst)
	shares := map[string]float64{"Mix/A": 0.6, "Mix/B": 0.3, "Mix/C": 0.1}
	if sum.Calls != total || sum.Conns != mixConns || len(sum.Routes) != len(shares) {
		t.Errorf("summary: %d calls over %d connections, %d routes; want %d over %d, 3 routes", sum.Calls, sum.Conns, len(sum.Routes), total, mixConns)
	}
	for _, r := range sum.Routes {
		if math.Abs(r.Share-shares[r.Route]) > 0.01 {
			t.Errorf("summary: %s is %.3f of the calls, want %.2f ±0.01", r.Route, r.Share, shares[r.Route])
		}
	}

	recorded, err := OpenRecording(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(recorded.Calls)) != total || len(recorded.Skipped) != 0 {
		t.Fatalf("the recording holds %d calls, %v skipped; want %d, none", len(recorded.Calls), recorded.Skipped, total)
	}
	for i, c := range recorded.Calls {
		if !c.Answered {
			t.Fatalf("call %d (%s at %v) has no recorded answer", i, c.Route, c.At)
		}
	}
	rate := float64(total) / recorded.Length.Seconds()
	for _, speed := range []float64{1, 4} {
		m := startMix(t, false)
		checkMixReplay(t, m, replayAt(t, m.addr, recorded, speed, false), speed, rate)
	}

	changed := startMix(t, true)
	c := replayAt(t, changed.addr, recorded, 4, true, "served.at").Replay.Compare
	if c.Compared != total || c.Mismatches != total*3/10 || len(c.ByRoute) != 1 || c.ByRoute["Mix/B"] == nil {
		t.Errorf("compare: %d of %d differ, by route %v; want Mix/B's %d alone", c.Mismatches, c.Compared, c.ByRoute, total*3/10)
	}
}

// recordFrom records what live receives, with its answers, into a new
// file at path, through the server's own tap, and returns the recorder,
// the address to call live at, and the function that stops feeding the
// recorder.
func recordFrom(t *testing.T, live *mixServer, path string) (*record.Recorder, string, func()) {
	t.Helper()
	rec, err := record.Create(path, record.Options{Answers: true, Source: "server", Server: live.addr})
	if err != nil {
		t.Fatal(err)
	}
	live.srv.SetTap(rec)
	return rec, live.addr, func() { live.srv.SetTap(nil) }
}
