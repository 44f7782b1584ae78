package daemon

import (
	"errors"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/rpcd/rpcd/auth"
	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/internal/optcheck"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/ratelimit"
	"github.com/rpcd/rpcd/reactor"
)

// A ConfigError is one mistake in a configuration: a value a Config may
// not hold, a file a setting names that cannot be used, or, from Load, a
// key, a variable or a value that does not parse. Its message names
// settings by their keys ("rpcd: loops is -1, want 0 or more"); Text
// names them as its caller's user knows them (rpcd serve: "-loops").
type ConfigError struct{ msg optcheck.Named }

// key is the name of a setting, or of another flag, in a ConfigError.
type key = optcheck.Name

func configErrorf(format string, args ...any) *ConfigError {
	return &ConfigError{optcheck.Namedf(format, args...)}
}

// Error returns the message, "rpcd: " and Text(nil).
func (e *ConfigError) Error() string { return "rpcd: " + e.Text(nil) }

// Text returns the message with each setting it names written
// name(its key); with a nil name, as its key.
func (e *ConfigError) Text(name func(key string) string) string { return e.msg.Text(name) }

// Settings returns the keys of the settings the message names.
func (e *ConfigError) Settings() []string { return e.msg.Names() }

// Validate reports every setting of c the daemon cannot take, each a
// *ConfigError, joined (errors.Join); nil if there is none. New reports
// these and also what is wrong with the files the settings name, which
// Validate does not read.
func (c Config) Validate() error {
	_, errs := c.check()
	return errors.Join(errs...)
}

// rules are the settings whose text check has parsed.
type rules struct {
	roles      map[string][]string
	topicRules map[string]auth.TopicRules
	topics     *auth.TopicPermissions
	limits     map[string]ratelimit.Limit
	meta       map[string]string
	level      slog.Level
}

// check returns the rules c's texts give, and every mistake in c, in the
// order of the settings but for those the reactor judges, which come
// first.
func (c *Config) check() (*rules, []error) {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, configErrorf(format, args...)) }
	r := &rules{}
	ro := c.reactorOptions()
	for _, err := range unjoin(ro.Validate()) {
		var oe *reactor.OptionError
		if errors.As(err, &oe) {
			add("%s is %v, want %s", key(reactorKey(oe.Field)), oe.Value, oe.Want)
		}
	}
	if c.SlowSubscriber != "drop" && c.SlowSubscriber != "cutoff" {
		add("%s is %q, want drop or cutoff", key("slow-subscriber"), c.SlowSubscriber)
	}
	if c.DrainTimeout <= 0 {
		add("%s is %v, want more than 0", key("drain-timeout"), c.DrainTimeout)
	}
	if c.UpgradeTimeout <= 0 {
		add("%s is %v, want more than 0", key("upgrade-timeout"), c.UpgradeTimeout)
	}
	errs = append(errs, checkListenAddr("addr", c.Addr, true))
	if c.Gateway != "" {
		errs = append(errs, checkListenAddr("gateway", c.Gateway, true))
	}
	if c.Admin != "" {
		errs = append(errs, checkListenAddr("admin", c.Admin, false))
	}
	switch {
	case c.GatewayMaxConns < 0:
		add("%s is %d, want 0 or more", key("gateway-max-conns"), c.GatewayMaxConns)
	case c.Gateway == "" && c.GatewayMaxConns != 0 && c.GatewayMaxConns != DefaultConfig().GatewayMaxConns:
		add("%s goes with %s", key("gateway-max-conns"), key("gateway"))
	}
	if cors, err := c.gatewayCORS(); err != nil {
		add("%s: %s", key("gateway-cors"), strings.TrimPrefix(bare(err), "gateway: CORS: "))
	} else if c.GatewayCORSCred && len(cors.Origins) == 0 {
		add("%s goes with %s", key("gateway-cors-credentials"), key("gateway-cors"))
	}
	errs = append(errs, c.checkEtcd(r)...)

	switch {
	case c.TLSCert == "" && c.TLSKey == "" && c.TLSClientCA != "":
		add("%s needs %s and %s", key("tls-client-ca"), key("tls-cert"), key("tls-key"))
	case (c.TLSCert == "") != (c.TLSKey == ""):
		add("%s and %s go together", key("tls-cert"), key("tls-key"))
	}
	if c.TLSClientAuth != "require" && c.TLSClientAuth != "verify-if-given" {
		add("%s is %q, want require or verify-if-given", key("tls-client-auth"), c.TLSClientAuth)
	}
	errs = append(errs, c.checkAdmin()...)
	var err error
	if r.roles, err = auth.ParseRoles(c.AuthRequire); err != nil {
		add("%s %s", key("auth-require"), bare(err))
	}
	if r.topicRules, err = auth.ParseTopicRules(c.AuthTopics); err != nil {
		add("%s %s", key("auth-topics"), bare(err))
	} else if r.topicRules != nil {
		if r.topics, err = auth.Topics(r.topicRules); err != nil {
			add("%s: %s", key("auth-topics"), bare(err))
		}
	}
	if r.limits, err = ratelimit.ParseLimits(c.RateLimit); err != nil {
		add("%s %s", key("rate-limit"), bare(err))
	}
	level, ok := levels[c.LogLevel]
	if !ok {
		add("%s is %q, want debug, info, warn or error", key("log-level"), c.LogLevel)
	}
	r.level = level
	if c.LogFormat != "text" && c.LogFormat != "json" {
		add("%s is %q, want text or json", key("log-format"), c.LogFormat)
	}
	// Whether the settings ask for a way to authenticate (or TLS), whether
	// or not its files can be read.
	authenticates := c.AuthTokens != "" || c.AuthHMACKey != "" || (c.TLSCert != "" && c.TLSKey != "")
	if r.roles != nil && !authenticates {
		add("%s needs a way to authenticate: %s, %s or %s", key("auth-require"), key("auth-tokens"), key("auth-hmac-key"), key("tls-client-ca"))
	}
	if namesRoles(r.topicRules) && !authenticates {
		add("%s names roles, which need a way to authenticate: %s, %s or %s (role * needs none)", key("auth-topics"), key("auth-tokens"), key("auth-hmac-key"), key("tls-client-ca"))
	}
	return r, nonNil(errs)
}

// levels are the values of LogLevel.
var levels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

// reactorKey returns the key of the setting that sets the field of
// reactor.Options: the field of Config of its name, or MaxFrame.
func reactorKey(field string) string {
	for _, s := range settings {
		if s.Field == field {
			return s.Key
		}
	}
	return "max-frame" // Limits.MaxFrameSize
}

// reactorOptions returns the reactor.Options c's settings give, but for
// what New builds from them (TLS, authentication, topics, logger).
func (c *Config) reactorOptions() reactor.Options {
	loops := c.Loops
	if loops == 0 {
		loops = defaultLoops(c.Gateway != "")
	}
	return reactor.Options{
		Loops:            loops,
		Limits:           proto.Limits{MaxFrameSize: c.MaxFrame},
		MaxInflight:      c.MaxInflight,
		MaxConns:         c.MaxConns,
		MaxOutbound:      c.MaxOutbound,
		MaxSubscriptions: c.MaxSubscriptions,
		SubscriberQueue:  c.SubscriberQueue,
		SlowSubscriber:   map[string]reactor.SlowPolicy{"cutoff": reactor.CutOff}[c.SlowSubscriber],
		FrameTimeout:     c.FrameTimeout,
		IdleTimeout:      c.IdleTimeout,
		KeepAlive:        c.KeepAlive,
		KeepAliveTimeout: c.KeepAliveTimeout,
		WriteTimeout:     c.WriteTimeout,
		MaxConnAge:       c.MaxConnAge,
		MaxConnAgeGrace:  c.MaxConnAgeGrace,
		HandshakeTimeout: c.HandshakeTimeout,
		CompressMin:      c.CompressMin,
	}
}

// checkEtcd checks the settings of registration in etcd, and parses Meta
// and Zone into r.meta.
func (c *Config) checkEtcd(r *rules) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, configErrorf(format, args...)) }
	if c.Etcd == "" && (c.Service != "" || c.Advertise != "" || c.Meta != "" || c.Zone != "") {
		add("%s, %s, %s and %s go with %s", key("service"), key("advertise"), key("meta"), key("zone"), key("etcd"))
	}
	if strings.ContainsAny(c.Zone, ", =") {
		add("%s is %q, want a name without commas, spaces or =", key("zone"), c.Zone)
	}
	if c.Etcd == "" && c.etcdAccessGiven() {
		add("%s, %s, %s, %s, %s and %s go with %s", key("etcd-tls"), key("etcd-cacert"), key("etcd-cert"), key("etcd-key"), key("etcd-user"), key("etcd-password-file"), key("etcd"))
	}
	if c.Etcd != "" && c.Service == "" {
		add("%s needs %s, the name to register under", key("etcd"), key("service"))
	}
	if c.Service != "" && (strings.Contains(c.Service, "/") || strings.TrimSpace(c.Service) != c.Service) {
		add("%s is %q, want a name without slashes or spaces", key("service"), c.Service)
	}
	if c.Weight < 1 || c.Weight > client.MaxWeight {
		add("%s is %d, want 1 to %d", key("weight"), c.Weight, client.MaxWeight)
	}
	if c.EtcdTTL < time.Second {
		add("%s is %v, want at least 1s", key("etcd-ttl"), c.EtcdTTL)
	}
	if c.Meta != "" || c.Zone != "" {
		r.meta = map[string]string{}
	}
	if c.Meta != "" {
		for _, kv := range strings.Split(c.Meta, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				add("%s has %q, want key=value", key("meta"), kv)
				break
			}
			r.meta[k] = v
		}
	}
	if _, dup := r.meta[client.ZoneKey]; dup && c.Zone != "" {
		add("%s names a zone, and so does %s: give one", key("meta"), key("zone"))
	} else if c.Zone != "" {
		r.meta[client.ZoneKey] = c.Zone
	}
	errs = append(errs, c.checkEtcdAccess())
	if c.Etcd != "" && c.Advertise == "" && unspecifiedHost(c.Addr) {
		add("%s is %s, which clients cannot dial: give %s, the address to register", key("addr"), c.Addr, key("advertise"))
	}
	return errs
}

// checkAdmin checks the settings of the admin listener's authentication
// and of recording.
func (c *Config) checkAdmin() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, configErrorf(format, args...)) }
	switch {
	case c.AdminTLSCert == "" && c.AdminTLSKey == "" && c.AdminClientCA != "":
		add("%s needs %s and %s", key("admin-client-ca"), key("admin-tls-cert"), key("admin-tls-key"))
	case (c.AdminTLSCert == "") != (c.AdminTLSKey == ""):
		add("%s and %s go together", key("admin-tls-cert"), key("admin-tls-key"))
	}
	if c.Record == "" && (c.RecordDuration != 0 || c.RecordMaxBytes != 0 || c.RecordSample != 0 || c.RecordRoutes != "" || c.RecordRedact != "" || c.RecordAnswers) {
		add("%s, %s, %s, %s, %s and %s go with %s", key("record-duration"), key("record-max-bytes"), key("record-sample"), key("record-routes"), key("record-redact"), key("record-answers"), key("record"))
	}
	if c.RecordDuration < 0 {
		add("%s is %v, want 0 or more", key("record-duration"), c.RecordDuration)
	}
	if c.RecordMaxBytes < 0 {
		add("%s is %d, want 0 or more", key("record-max-bytes"), c.RecordMaxBytes)
	}
	if c.RecordSample < 0 || c.RecordSample > 1 || c.RecordSample != c.RecordSample {
		add("%s is %v, want a fraction in (0, 1], or 0 for 1", key("record-sample"), c.RecordSample)
	}
	return errs
}

// etcdAccessGiven reports whether any setting of EtcdAccess is set.
func (c *Config) etcdAccessGiven() bool {
	return c.EtcdTLS || c.EtcdCACert != "" || c.EtcdCert != "" || c.EtcdKey != "" || c.EtcdUser != "" || c.EtcdPasswordFile != ""
}

// checkEtcdAccess refuses EtcdAccess settings that do not go together.
func (c *Config) checkEtcdAccess() error {
	switch {
	case (c.EtcdCert == "") != (c.EtcdKey == ""):
		return configErrorf("%s and %s go together", key("etcd-cert"), key("etcd-key"))
	case (c.EtcdUser == "") != (c.EtcdPasswordFile == ""):
		return configErrorf("%s and %s go together", key("etcd-user"), key("etcd-password-file"))
	}
	return nil
}

// checkListenAddr refuses an address setting's value addr that cannot be
// listened on whatever the host: no port, a port that is no number or
// service name, or (when unixOK) an empty unix:// path. A host name that
// does not resolve, or an address taken, is found when listening.
func checkListenAddr(name, addr string, unixOK bool) error {
	if unixOK {
		if path, ok := strings.CutPrefix(addr, "unix://"); ok {
			if path == "" {
				return configErrorf("%s is %q, want unix:///path", key(name), addr)
			}
			return nil
		}
		addr = strings.TrimPrefix(addr, "tcp://")
	}
	want := "host:port (port 0 picks one)"
	if unixOK {
		want += " or unix:///path"
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return configErrorf("%s is %q, want %s", key(name), addr, want)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return configErrorf("%s is %q: port %q is no number from 0 to 65535, want %s", key(name), addr, port, want)
	}
	return nil
}

// unspecifiedHost reports whether addr, a TCP address to listen on, has
// no host or an unspecified one (0.0.0.0, ::): every interface.
func unspecifiedHost(addr string) bool {
	if strings.HasPrefix(addr, "unix://") {
		return false
	}
	host, _, err := net.SplitHostPort(strings.TrimPrefix(addr, "tcp://"))
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "" || ip != nil && ip.IsUnspecified()
}

// namesRoles reports whether rules name a role other than auth.EveryRole:
// rules only an authenticated identity can have.
func namesRoles(rules map[string]auth.TopicRules) bool {
	for role := range rules {
		if role != auth.EveryRole {
			return true
		}
	}
	return false
}

// fileError makes err, from reading the files that some settings name
// (their keys and values in files, key then value), a ConfigError naming
// the settings: those whose file its message names, else all that name
// one; nil for nil.
func fileError(err error, files ...string) error {
	if err == nil {
		return nil
	}
	msg := bare(err)
	var named, given []any
	for i := 0; i < len(files); i += 2 {
		if files[i+1] == "" {
			continue
		}
		given = append(given, key(files[i]))
		if strings.Contains(msg, files[i+1]) {
			named = append(named, key(files[i]))
		}
	}
	if len(named) == 0 {
		named = given
	}
	return configErrorf(strings.Repeat("%s, ", max(len(named)-1, 0))+"%s: %s", append(named, msg)...)
}

// bare is err's message without the prefixes "rpcd: " and a package's.
func bare(err error) string {
	msg := strings.TrimPrefix(err.Error(), "rpcd: ")
	for _, pkg := range []string{"auth: ", "ratelimit: "} {
		msg = strings.TrimPrefix(msg, pkg)
	}
	return msg
}

// unjoin returns the errors err joins (errors.Join), or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

// nonNil returns errs without its nils.
func nonNil(errs []error) []error {
	out := errs[:0]
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}
