package daemon

import (
	"errors"
	"flag"
	"io"
	"sort"
)

// again is what Load keeps to read the configuration again (Again): the
// flag set it read, the environment it was given and the flags given on
// the command line, with their values.
type again struct {
	fs      *flag.FlagSet
	environ []string
	args    map[string]string // flag name -> value, as the command line gave them
	others  []string          // from Again: the flags of fs that are no setting whose values changed
}

// Again reads the configuration again as Load read l: the flags given on
// the command line as they were given, then the environment Load was
// given, the credentials in $CREDENTIALS_DIRECTORY and the file, as they
// are now. It returns the Config of the settings, base's values for those
// the flag set does not define, and what Load made of them: Err, every
// mistake. A flag of the set that is no setting (FileFlag, a command's
// own) is read again too, but its value is not used: Reload names it
// among the settings that need an upgrade if it changed. A daemon given
// WithReloadFrom(l) reads its configuration so on SIGHUP.
func (l *Loaded) Again(base Config) (Config, *Loaded) {
	if l.fs == nil {
		return base, &Loaded{Err: configErrorf("the configuration to read again was not loaded (Load)"), Fatal: true}
	}
	cfg := base
	fs := flag.NewFlagSet(l.fs.Name(), flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	others := map[string]*otherFlag{}
	l.fs.VisitAll(func(f *flag.Flag) {
		if s, ok := Lookup(f.Name); ok {
			_ = s.Value(&cfg).Set(f.DefValue) // the flag's default, as at start
			s.define(fs, &cfg, "")
			return
		}
		o := &otherFlag{text: f.DefValue}
		if g, ok := f.Value.(flag.Getter); ok {
			o.get = g.Get()
		}
		others[f.Name] = o
		fs.Var(o, f.Name, f.Usage)
	})
	var errs []error
	for name, v := range l.args {
		if err := fs.Set(name, v); err != nil {
			errs = append(errs, configErrorf("-%s: %v", name, err))
		}
	}
	read := Load(fs, l.environ)
	if len(errs) > 0 {
		read.Err = errors.Join(append(errs, unjoin(read.Err)...)...)
	}
	for name, o := range others {
		if o.text != l.fs.Lookup(name).Value.String() {
			read.others = append(read.others, name)
		}
	}
	sort.Strings(read.others)
	return cfg, read
}

// otherFlag stands, in the flag set Again reads, for a flag that is no
// setting: it takes a value of the original's type, and keeps it as
// text.
type otherFlag struct {
	text string
	get  any // a value of the original's type, for Load's checks of the file's values
}

func (o *otherFlag) String() string     { return o.text }
func (o *otherFlag) Set(s string) error { o.text = s; return nil }
func (o *otherFlag) Get() any           { return o.get }
