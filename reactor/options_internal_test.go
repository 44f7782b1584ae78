package reactor

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// TestDefaultLoopsLeaveAP: by default the server runs one event loop fewer
// than there are Ps, at least one, so that a loop waiting in epoll_wait on
// every P cannot keep the rest of the process from Go's network poller
// (Options.Loops); a number set is kept.
func TestDefaultLoopsLeaveAP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for procs, want := range map[int]int{1: 1, 2: 1, 4: 3, 16: 15} {
		runtime.GOMAXPROCS(procs)
		if got := (Options{}).withDefaults().Loops; got != want || DefaultLoops() != want {
			t.Errorf("GOMAXPROCS %d: %d loops by default (DefaultLoops %d), want %d", procs, got, DefaultLoops(), want)
		}
		if got := (Options{Loops: procs}).withDefaults().Loops; got != procs {
			t.Errorf("GOMAXPROCS %d, Loops %d: %d loops", procs, procs, got)
		}
	}
}

// TestOptionsZeroRule: a zero Options takes DefaultOptions' every field;
// a negative value is kept where it turns something off, and Validate
// names every other one at once, each an *OptionError.
func TestOptionsZeroRule(t *testing.T) {
	got, want := (Options{}).withDefaults(), DefaultOptions()
	got.Logger, want.Logger, got.StdTransport, want.StdTransport = nil, nil, false, false
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Options{}.withDefaults():\n%+v\nDefaultOptions():\n%+v", got, want)
	}
	d := DefaultOptions()
	if err := d.Validate(); err != nil {
		t.Errorf("DefaultOptions: %v", err)
	}
	off := Options{KeepAlive: -1, IdleTimeout: -1, InlineThreshold: -1, InlineBudget: -1, CompressMin: -1, MaxConnAge: -1, MaxConnAgeGrace: -1}
	if err := off.Validate(); err != nil {
		t.Errorf("negative values that turn things off: %v", err)
	}
	if o := off.withDefaults(); o.KeepAlive != -1 || o.InlineThreshold != -1 || o.InlineBudget != -1 || o.CompressMin != -1 || o.MaxConnAge != -1 || o.MaxConnAgeGrace != -1 {
		t.Errorf("withDefaults changed a negative value that turns something off: %+v", o)
	}
	bad := Options{Loops: -1, MaxConns: -2, FrameTimeout: -time.Second, SlowSubscriber: 7, Limits: proto.Limits{MaxFrameSize: 8}}
	var fields []string
	for _, err := range bad.Validate().(interface{ Unwrap() []error }).Unwrap() {
		var oe *OptionError
		if !errors.As(err, &oe) {
			t.Fatalf("%T %v, want an *OptionError", err, err)
		}
		fields = append(fields, oe.Field)
	}
	if got := strings.Join(fields, " "); got != "Limits.MaxFrameSize Loops MaxConns FrameTimeout SlowSubscriber" {
		t.Errorf("Validate named %s", got)
	}
	if msg := (&OptionError{Pkg: "reactor", Field: "MaxConns", Value: -2, Want: "0 or more"}).Error(); msg != "rpcd: reactor: Options.MaxConns is -2, want 0 or more" {
		t.Errorf("message %q", msg)
	}
	s := New(handler.NewRegistry(), bad)
	if err := s.Start("127.0.0.1:0"); !errors.Is(err, s.invalid) || err == nil {
		t.Errorf("Start with bad Options: %v, want Validate's error", err)
		_ = s.Shutdown(context.Background())
	}
}

// TestMaxConnAgeJitter: a connection's maximum age is Options.MaxConnAge
// give or take up to a tenth, drawn for each connection, so that
// connections opened together do not go away together; none without
// MaxConnAge (zero, the default, or negative). The sweeper looks often
// enough to keep to it: at least four times an age, and a grace.
func TestMaxConnAgeJitter(t *testing.T) {
	for _, age := range []time.Duration{0, -time.Second} {
		o := Options{MaxConnAge: age}.withDefaults()
		if got := o.maxConnAge(); got != 0 {
			t.Errorf("MaxConnAge %v: a connection's maximum age %v, want none", age, time.Duration(got))
		}
	}
	o := Options{MaxConnAge: time.Second}.withDefaults()
	lo, hi := int64(900*time.Millisecond), int64(1100*time.Millisecond)
	seen := map[int64]bool{}
	below, above := false, false
	for range 1000 {
		got := o.maxConnAge()
		if got < lo || got > hi {
			t.Fatalf("MaxConnAge 1s: a connection's maximum age %v, want 0.9s to 1.1s", time.Duration(got))
		}
		seen[got] = true
		below, above = below || got < int64(time.Second), above || got > int64(time.Second)
	}
	if len(seen) < 100 || !below || !above {
		t.Errorf("1000 connections' maximum ages: %d distinct, some below 1s %v, some above %v; want them spread both ways", len(seen), below, above)
	}
	for _, tc := range []struct {
		age, grace, want time.Duration
	}{
		{0, 0, time.Second}, // the defaults alone: 30s limits, looked at every 1s at most
		{400 * time.Millisecond, 0, 100 * time.Millisecond},
		{time.Minute, 200 * time.Millisecond, 50 * time.Millisecond},
		{time.Minute, -1, time.Second},
	} {
		o := Options{MaxConnAge: tc.age, MaxConnAgeGrace: tc.grace}.withDefaults()
		if got := o.sweepEvery(); got != tc.want {
			t.Errorf("MaxConnAge %v, grace %v: the sweeper looks every %v, want %v", tc.age, tc.grace, got, tc.want)
		}
	}
}
