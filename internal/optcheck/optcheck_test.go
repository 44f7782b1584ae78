package optcheck

import (
	"errors"
	"testing"
	"time"

	"github.com/rpcd/rpcd/proto"
)

// TestChecks: every mistake is named, in the order checked, with its
// package, field, value and what it may be; none is nil.
func TestChecks(t *testing.T) {
	c := New("pkg")
	c.Limits(proto.Limits{MaxFrameSize: 3, MaxRoute: -1})
	NotNegative(c, "Count", 0)
	NotNegative(c, "Wait", -time.Second)
	c.Join(nil)
	c.Join(errors.New("rpcd: pkg: its own"))
	var got []string
	for _, err := range c.Err().(interface{ Unwrap() []error }).Unwrap() {
		got = append(got, err.Error())
	}
	want := []string{
		"rpcd: pkg: Options.Limits.MaxFrameSize is 3, want 0 (the default) or at least 24",
		"rpcd: pkg: Options.Limits.MaxRoute is -1, want 0 or more",
		"rpcd: pkg: Options.Wait is -1s, want 0 or more",
		"rpcd: pkg: its own",
	}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("mistake %d: %q, want %q", i, got[i], want[i])
		}
	}
	if New("pkg").Err() != nil {
		t.Error("no mistakes, yet an error")
	}
}

// TestSetZero: a zero field takes its default; any other value stays.
func TestSetZero(t *testing.T) {
	a, b, c := 0, -1, 5
	SetZero(&a, 7)
	SetZero(&b, 7)
	SetZero(&c, 7)
	if a != 7 || b != -1 || c != 5 {
		t.Fatalf("%d %d %d, want 7 -1 5", a, b, c)
	}
}

// TestNamed: a Named message writes its names as its caller asks, and
// lists them; other arguments are formatted as they are.
func TestNamed(t *testing.T) {
	m := Namedf("%s is %d, want %s or %s", Name("loops"), -1, "0", Name("auto"))
	if got, want := m.Text(nil), "loops is -1, want 0 or auto"; got != want {
		t.Errorf("Text(nil) = %q, want %q", got, want)
	}
	if got, want := m.Text(func(n string) string { return "-" + n }), "-loops is -1, want 0 or -auto"; got != want {
		t.Errorf("Text(flag) = %q, want %q", got, want)
	}
	if got := m.Names(); len(got) != 2 || got[0] != "loops" || got[1] != "auto" {
		t.Errorf("Names() = %q, want [loops auto]", got)
	}
}
