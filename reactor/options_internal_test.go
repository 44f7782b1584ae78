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
	off := Options{KeepAlive: -1, IdleTimeout: -1, InlineThreshold: -1, InlineBudget: -1, CompressMin: -1}
	if err := off.Validate(); err != nil {
		t.Errorf("negative values that turn things off: %v", err)
	}
	if o := off.withDefaults(); o.KeepAlive != -1 || o.InlineThreshold != -1 || o.InlineBudget != -1 || o.CompressMin != -1 {
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
