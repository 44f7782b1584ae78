package client

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rpcd/rpcd/proto"
)

// TestOptionsZeroRule: a zero Options takes DefaultOptions' every field; a
// negative value is kept where it turns something off (a negative
// CompressMin compresses no payload), and Validate names every other one
// at once, each an *OptionError, which Dial refuses before it dials.
func TestOptionsZeroRule(t *testing.T) {
	got, want := (Options{}).withDefaults(), DefaultOptions()
	if got.Dial == nil || want.Dial == nil {
		t.Fatal("no Dial by default")
	}
	got.Dial, want.Dial, got.Logger, want.Logger = nil, nil, nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Options{}.withDefaults():\n%+v\nDefaultOptions():\n%+v", got, want)
	}
	d := DefaultOptions()
	if err := d.Validate(); err != nil {
		t.Errorf("DefaultOptions: %v", err)
	}
	off := Options{KeepAlive: -1, MaxRetries: -1, Timeout: -1, ProbeTimeout: -1, CompressMin: -1}
	if err := off.Validate(); err != nil {
		t.Errorf("negative values that turn things off: %v", err)
	}
	if o := off.withDefaults(); o.KeepAlive != -1 || o.MaxRetries != -1 || o.CompressMin != math.MaxInt {
		t.Errorf("withDefaults of values that turn things off: %+v", o)
	}
	bad := Options{Conns: -1, DialTimeout: -time.Second, MaxHandlers: -3, Compression: proto.Compression(3), Limits: proto.Limits{MaxFrameSize: 8}}
	var fields []string
	for _, err := range bad.Validate().(interface{ Unwrap() []error }).Unwrap() {
		var oe *OptionError
		if !errors.As(err, &oe) {
			t.Fatalf("%T %v, want an *OptionError", err, err)
		}
		fields = append(fields, oe.Field)
	}
	if got := strings.Join(fields, " "); got != "Limits.MaxFrameSize Conns MaxHandlers DialTimeout Compression" {
		t.Errorf("Validate named %s", got)
	}
	if _, err := Dial(context.Background(), "127.0.0.1:1", Options{Conns: -1}); err == nil || !strings.Contains(err.Error(), "rpcd: client: Options.Conns is -1, want 0 or more") {
		t.Errorf("Dial with Conns -1: %v", err)
	}
}
