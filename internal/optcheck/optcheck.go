// Package optcheck is what the Options of rpcd's packages (reactor,
// client) share about their defaults and their checks: one rule for zero
// (SetZero: a zero field takes its default) and one shape of mistake
// (Error), gathered by a Validate that names every bad field at once
// (Checks).
package optcheck

import (
	"errors"
	"fmt"
	"time"

	"github.com/rpcd/rpcd/proto"
)

// SetZero sets *v to def if it is zero: the rule for every field of an
// Options that has a default.
func SetZero[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Error is a field of an Options that its Validate refuses.
type Error struct {
	Pkg   string // the package whose Options it is: "reactor", "client"
	Field string // "MaxConns", "Limits.MaxFrameSize"
	Value any    // its value
	Want  string // what it may be: "0 or more"
}

func (e *Error) Error() string {
	return fmt.Sprintf("rpcd: %s: Options.%s is %v, want %s", e.Pkg, e.Field, e.Value, e.Want)
}

// Checks gathers the mistakes a Validate finds.
type Checks struct {
	pkg  string
	errs []error
}

// New returns the checks of package pkg's Options.
func New(pkg string) *Checks { return &Checks{pkg: pkg} }

// Add records that field, whose value is value, is not what it may be:
// want.
func (c *Checks) Add(field string, value any, want string) {
	c.errs = append(c.errs, &Error{Pkg: c.pkg, Field: field, Value: value, Want: want})
}

// Join records err, an error of a check of the package's own; nil is
// nothing.
func (c *Checks) Join(err error) {
	if err != nil {
		c.errs = append(c.errs, err)
	}
}

// NotNegative records the field name if its value v, an int or a
// time.Duration, is negative where only 0 (the default) or more is taken.
func NotNegative[T int | time.Duration](c *Checks, name string, v T) {
	if v < 0 {
		c.Add(name, v, "0 or more")
	}
}

// Limits records the fields of lim, named as Options' field Limits, that
// no connection can take: a frame limit below a header, negative limits.
func (c *Checks) Limits(lim proto.Limits) {
	if lim.MaxFrameSize != 0 && lim.MaxFrameSize < proto.HeaderSize {
		c.Add("Limits.MaxFrameSize", lim.MaxFrameSize, fmt.Sprintf("0 (the default) or at least %d", proto.HeaderSize))
	}
	NotNegative(c, "Limits.MaxRoute", lim.MaxRoute)
	NotNegative(c, "Limits.MaxMetadata", lim.MaxMetadata)
}

// Err returns every mistake recorded, joined (errors.Join); nil for none.
func (c *Checks) Err() error { return errors.Join(c.errs...) }

// Named is a message whose arguments of type Name are names of settings (a
// field, a key), which Text writes as its caller's user knows them: the
// shape of daemon.ConfigError and client.SecurityError.
type Named struct {
	format string
	args   []any
}

// Name is the name of a setting in a Named message.
type Name string

// Namedf returns the message format makes of args, each Name among them a
// setting's name.
func Namedf(format string, args ...any) Named { return Named{format: format, args: args} }

// Text returns the message with each Name written name(it); with a nil
// name, as it is.
func (m Named) Text(name func(string) string) string {
	args := make([]any, len(m.args))
	for i, a := range m.args {
		if n, ok := a.(Name); ok {
			if a = string(n); name != nil {
				a = name(string(n))
			}
		}
		args[i] = a
	}
	return fmt.Sprintf(m.format, args...)
}

// Names returns the names of the settings the message holds, in order.
func (m Named) Names() []string {
	var names []string
	for _, a := range m.args {
		if n, ok := a.(Name); ok {
			names = append(names, string(n))
		}
	}
	return names
}
