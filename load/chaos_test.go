package load

import (
	"testing"

	"github.com/rpcd/rpcd/proto"
)

// TestJudgeChaos: each promise chaos checks is one it finds broken.
func TestJudgeChaos(t *testing.T) {
	ok := chaosOutcome{}
	unprocessed := chaosOutcome{code: proto.CodeUnavailable, unprocessed: true}
	unknown := chaosOutcome{code: proto.CodeUnavailable}
	outcomes := [][]chaosOutcome{
		{ok, ok, unprocessed, unknown, unknown},
		{ok, unprocessed, {code: proto.CodeUnknown, untyped: "EOF"}, {code: proto.CodeDeadlineExceeded, late: true}},
	}
	ran := map[[2]int]int{
		{0, 0}: 1, {0, 1}: 2, // ran twice
		{0, 3}: 1, // unknown fate, ran
		{1, 1}: 1, // unprocessed, yet ran
		{7, 7}: 1, // nobody's call
		// {1, 0} is missing: a reply for a call that never ran
	}
	rep := &ChaosReport{Errors: map[string]int{}}
	judgeChaos(rep, outcomes, ran)
	if rep.Calls != 9 || rep.Replies != 3 || rep.Unprocessed != 2 || rep.UnknownRan != 1 || rep.UnknownNot != 2 || rep.RanTwice != 1 {
		t.Errorf("report %+v", rep)
	}
	for _, want := range []string{
		"call 0-1 ran 2 times",
		"call 1-0 got a reply but never ran",
		"call 1-1 failed as unprocessed (unavailable) but ran",
		"call 1-2 ended with an untyped error: EOF",
		"call 1-3 returned more than a second past its deadline",
		"the ledger has 7-7 (1 times), a call no caller made",
	} {
		found := false
		for _, b := range rep.Breaches {
			found = found || b == want
		}
		if !found {
			t.Errorf("breach %q not found in %q", want, rep.Breaches)
		}
	}
	if rep.BreachCount != 6 {
		t.Errorf("%d breaches, want 6: %q", rep.BreachCount, rep.Breaches)
	}
}
