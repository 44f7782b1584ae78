package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rpcd/rpcd/load"
)

// TestProcessChaos runs a short chaos: the server is stopped and started
// several times while calls go on, and no promise is broken.
func TestProcessChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds")
	}
	r := rpcd(t, "", "chaos", "-d", "3s", "-kill-every", "400ms", "-down", "50ms", "-term", "0.3", "-callers", "8", "-json")
	if r.code != 0 {
		t.Fatalf("exit status %d; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	var rep load.ChaosReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, r.stdout)
	}
	switch {
	case rep.Restarts < 2: // one every 400ms asked; a loaded machine starts rpcd slower
		t.Errorf("%d restarts in 3s, with one asked every 400ms on average", rep.Restarts)
	case rep.Replies == 0:
		t.Errorf("no call got a reply")
	case rep.BreachCount != 0 || rep.RanTwice != 0:
		t.Errorf("breaches: %q", rep.Breaches)
	case rep.LedgerLines != rep.Replies+rep.UnknownRan:
		t.Errorf("ledger has %d lines; replies %d + unknown fate that ran %d", rep.LedgerLines, rep.Replies, rep.UnknownRan)
	}
	if !strings.Contains(r.stderr, "chaos: server at 127.0.0.1:") {
		t.Errorf("stderr: %s", r.stderr)
	}
	t.Logf("%+v", rep)
}
