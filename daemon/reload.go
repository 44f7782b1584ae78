package daemon

import (
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/rpcd/rpcd/admin"
)

// A reload applies, while the daemon serves, the settings that can change
// so (LiveSettings): it builds a new security (security.go) from the new
// Config and swaps it in whole; the reactor, the gateway and the
// middleware read the running one at each use. Every other setting that
// changed needs an upgrade: the daemon keeps running with its old value
// and says so.

// reloadSignal is the signal on which RunSignals reloads.
const reloadSignal = syscall.SIGHUP

// liveSettings are the keys of the settings a reload changes while the
// daemon serves. Turning TLS on or off (tls-cert, tls-key), or
// authentication (auth-tokens, auth-hmac-key, with auth-require and
// auth-topics, the rules that go with it), needs an upgrade all the same.
var liveSettings = []string{
	"rate-limit", "log-level",
	"tls-cert", "tls-key", "tls-client-ca", "tls-client-auth",
	"auth-tokens", "auth-hmac-key", "auth-require", "auth-topics",
}

// LiveSettings returns the keys of the settings a reload changes while
// the daemon serves (Daemon.Reload): tokens and keys, roles, topic rules,
// rate limits, the TLS certificate and client CAs, and the log level.
// The others need an upgrade, as does turning TLS or authentication on or
// off.
func LiveSettings() []string { return slices.Clone(liveSettings) }

// reloads is the state of a daemon's reloads.
type reloads struct {
	mu     sync.Mutex    // one reload at a time
	failed atomic.Uint64 // reloads refused
	from   *Loaded       // WithReloadFrom's
}

// WithReloadFrom has a reload on SIGHUP (RunSignals) read the
// configuration again as l was read (Loaded.Again): the command line, the
// environment, the credentials and the file. Without it, SIGHUP reloads
// the running Config (Daemon.Config), reading again the files it names.
// A nil l is no option.
func WithReloadFrom(l *Loaded) Option { return func(d *Daemon) { d.reloads.from = l } }

// Reloaded is what a reload did.
type Reloaded struct {
	// Generation is the generation of the configuration the daemon runs
	// after the reload: 1 for New's, one more for each reload applied.
	Generation uint64
	// Changed are the keys of the live settings whose values changed,
	// now applied. The files the settings name are read again at every
	// reload, changed or not.
	Changed []string
	// NeedUpgrade are the keys of the settings that changed but cannot
	// change while the daemon serves: it runs with their old values.
	NeedUpgrade []string
}

// Config returns the Config the daemon runs: New's, with the live
// settings of the last reload applied.
func (d *Daemon) Config() Config { return d.sec.Load().cfg }

// Reload applies cfg's live settings (LiveSettings) while the daemon
// serves: it reads the files they name again and swaps in what they give
// whole. New connections authenticate with the new tokens and keys and
// get the new certificate; a connection already open keeps its identity,
// and its topic permissions once it has published or subscribed. Every
// call from then on is held to the new roles and rate limits (a route
// whose limit did not change keeps its bucket), and the daemon's own
// logger (not one given WithLogger) logs at the new level. The other settings of cfg that differ from the
// running ones need an upgrade: Reloaded names them, and so does a
// warning in the log. A cfg with mistakes, its own or its files', changes
// nothing: Reload logs every one, returns them all joined (each a
// *ConfigError), and counts the refusal in /metrics. It may be called
// before, while or after Run runs, from any goroutine.
func (d *Daemon) Reload(cfg Config) (Reloaded, error) {
	return d.reload(func(Config) (Config, *Loaded) { return cfg, nil })
}

// reloadOnSignal is RunSignals' reload on SIGHUP: from WithReloadFrom's
// Loaded read again, or the running Config, its files read again.
func (d *Daemon) reloadOnSignal() {
	d.log.Info("rpcd: reloading the configuration", "signal", reloadSignal.String())
	from := d.reloads.from
	_, _ = d.reload(func(running Config) (Config, *Loaded) {
		if from == nil {
			return running, nil
		}
		return from.Again(running)
	})
}

// reload applies the Config source gives, given the running one; a
// *Loaded it gives says how it was read (its mistakes, its warnings, the
// other flags that changed).
func (d *Daemon) reload(source func(running Config) (Config, *Loaded)) (Reloaded, error) {
	d.reloads.mu.Lock()
	defer d.reloads.mu.Unlock()
	old := d.sec.Load()
	cfg, loaded := source(old.cfg)

	var errs []error
	var sec *security
	if loaded != nil {
		for _, w := range loaded.Warnings {
			d.log.Warn("rpcd: " + w)
		}
		errs = unjoin(loaded.Err)
	}
	if loaded == nil || !loaded.Fatal { // else the settings are unknown, and checks of them would mislead
		r, cerrs := cfg.check()
		var err error
		sec, err = newSecurity(&cfg, r)
		errs = append(append(errs, cerrs...), unjoin(err)...)
	}
	if len(errs) > 0 {
		d.reloads.failed.Add(1)
		for _, err := range errs {
			d.log.Error("rpcd: reload: a mistake in the configuration", "err", mistake(err, loaded))
		}
		d.log.Error("rpcd: reload refused; the running configuration is kept", "mistakes", len(errs), "generation", old.generation)
		return Reloaded{Generation: old.generation}, errors.Join(errs...)
	}

	out := Reloaded{Generation: old.generation + 1}
	sec.cfg = old.cfg // the running settings, and below the live ones that changed
	tlsHeld := (sec.tls == nil) != (old.tls == nil)
	authHeld := (sec.authenticator == nil) != (old.authenticator == nil)
	for _, s := range settings {
		now := s.Value(&cfg).String()
		if s.Value(&old.cfg).String() == now {
			continue
		}
		held := tlsHeld && strings.HasPrefix(s.Key, "tls-") || authHeld && strings.HasPrefix(s.Key, "auth-")
		if !slices.Contains(liveSettings, s.Key) || held {
			out.NeedUpgrade = append(out.NeedUpgrade, s.Key)
			continue
		}
		_ = s.Value(&sec.cfg).Set(now)
		out.Changed = append(out.Changed, s.Key)
	}
	if loaded != nil {
		out.NeedUpgrade = append(out.NeedUpgrade, loaded.others...)
	}
	if tlsHeld {
		sec.tls, sec.gatewayTLS = old.tls, old.gatewayTLS
	}
	if authHeld {
		sec.authenticator, sec.roles, sec.allow, sec.topics = old.authenticator, old.roles, old.allow, old.topics
	}
	if sec.cfg.RateLimit == old.cfg.RateLimit {
		sec.limiter = old.limiter // its buckets, tokens and all
	}
	sec.generation = out.Generation
	d.sec.Store(sec)
	d.level.Set(sec.level)

	d.log.Info("rpcd: configuration reloaded", "generation", out.Generation, "changed", listText(out.Changed))
	if len(out.NeedUpgrade) > 0 {
		d.log.Warn("rpcd: settings changed that need an upgrade; their old values are kept", "settings", listText(out.NeedUpgrade))
	}
	return out, nil
}

// mistake is err's text for the log: a ConfigError's as the user named
// its settings, flags if the configuration was Loaded (with where each
// came from, as rpcd serve reports them at start), keys otherwise.
func mistake(err error, loaded *Loaded) string {
	var ce *ConfigError
	switch {
	case !errors.As(err, &ce):
		return bare(err)
	case loaded != nil:
		return loaded.Sources.Attribute(ce.Text(func(key string) string { return "-" + key }))
	}
	return ce.Text(nil)
}

// listText is keys comma-separated, or "none".
func listText(keys []string) string {
	if len(keys) == 0 {
		return "none"
	}
	return strings.Join(keys, ",")
}

// configStatus is the admin listener's Options.Config.
func (d *Daemon) configStatus() admin.ConfigStatus {
	s := d.sec.Load()
	return admin.ConfigStatus{Generation: s.generation, Loaded: s.loaded, Failed: d.reloads.failed.Load()}
}

// isReload reports whether sig asks RunSignals for a reload.
func isReload(sig os.Signal) bool { return sig == reloadSignal }
