package daemon

import (
	"flag"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/rpcd/rpcd/discovery/etcd"
	"github.com/rpcd/rpcd/reactor"
)

// Config is the daemon's configuration: one field per setting, the
// settings of rpcd serve's flags, environment variables and configuration
// file (docs/configuration.md). Settings gives each one's key, variable,
// default and help; the fields' own comments say where each goes. A
// Config comes from DefaultConfig: the fields that set reactor.Options
// keep the reactor's zero rule (0 is the reactor's default, a negative
// value turns off what can be turned off), but DrainTimeout, Weight and
// EtcdTTL have no default in zero.
type Config struct {
	Addr            string // the RPC port: reactor.Server's listener
	Gateway         string // the HTTP listener of package gateway and ws
	GatewayMaxConns int    // its connections at once (0: MaxConns' default)
	GatewayCORS     string // gateway.ParseOrigins' list: gateway.CORS's Origins, and /ws's
	GatewayCORSCred bool   // gateway.CORS's Credentials
	Admin           string // the HTTP listener of package admin
	Loops           int    // reactor.Options.Loops (0: one per P, one fewer with a gateway)

	MaxFrame         int           // reactor.Options.Limits.MaxFrameSize; the gateway's too
	MaxConns         int           // reactor.Options.MaxConns
	MaxInflight      int           // reactor.Options.MaxInflight
	MaxOutbound      int           // reactor.Options.MaxOutbound
	MaxSubscriptions int           // reactor.Options.MaxSubscriptions
	SubscriberQueue  int           // reactor.Options.SubscriberQueue
	SlowSubscriber   string        // reactor.Options.SlowSubscriber: "drop" or "cutoff"
	FrameTimeout     time.Duration // reactor.Options.FrameTimeout; the gateway's request read timeout
	IdleTimeout      time.Duration // reactor.Options.IdleTimeout; the gateway's keep-alive (0: 2m)
	KeepAlive        time.Duration // reactor.Options.KeepAlive
	KeepAliveTimeout time.Duration // reactor.Options.KeepAliveTimeout
	WriteTimeout     time.Duration // reactor.Options.WriteTimeout
	MaxConnAge       time.Duration // reactor.Options.MaxConnAge
	MaxConnAgeGrace  time.Duration // reactor.Options.MaxConnAgeGrace
	HandshakeTimeout time.Duration // reactor.Options.HandshakeTimeout
	DrainTimeout     time.Duration // the context of Run's drain
	RateLimit        string        // ratelimit.ParseLimits' text
	CompressMin      int           // reactor.Options.CompressMin; the gateway's

	LogLevel  string // "debug", "info", "warn" or "error"
	LogFormat string // "text" or "json"

	PIDFile        string        // written with the serving process's pid once it serves (upgrade.go)
	UpgradeTimeout time.Duration // how long an upgrade's new process has to serve (WithUpgrades)

	TLSCert       string // with TLSKey: reactor.Options.TLS; the gateway's
	TLSKey        string
	TLSClientCA   string // the CAs of mutual TLS
	TLSClientAuth string // "require" or "verify-if-given"
	AuthTokens    string // auth.ReadTokens' file
	AuthHMACKey   string // auth.ReadHMACKey's file
	AuthRequire   string // auth.ParseRoles' text
	AuthTopics    string // auth.ParseTopicRules' text

	Etcd             string // etcd.Endpoints' list; empty: no registration
	Service          string // etcd.Register's service
	Advertise        string // the client.Node's Addr; default the bound address
	Weight           int    // the client.Node's Weight
	Meta             string // the client.Node's Meta, "key=value,..."
	Zone             string // the client.Node's zone (client.ZoneKey)
	EtcdTTL          time.Duration
	EtcdTLS          bool // etcd.Config.TLS, from the system's CAs or the files below
	EtcdCACert       string
	EtcdCert         string
	EtcdKey          string
	EtcdUser         string // etcd.Config.Username
	EtcdPasswordFile string // etcd.Config.Password: its first line

	AdminTokenFile string // admin.Auth's Token: the file's first line
	AdminTLSCert   string // with AdminTLSKey: the admin listener serves HTTPS
	AdminTLSKey    string
	AdminClientCA  string // the CAs of the admin listener's mutual TLS: admin.Auth's ClientCerts

	RecordDir      string        // where recordings the admin listener starts are written; empty: os.TempDir()
	Record         string        // the file to record to from the start (record.Create)
	RecordDuration time.Duration // record.Options.Duration, for Record
	RecordMaxBytes int64         // record.Options.MaxBytes, for Record
	RecordSample   float64       // record.Options.Sample, for Record
	RecordRoutes   string        // record.Options.Routes, for Record: comma-separated
	RecordRedact   string        // record.Options.Redact, for Record: record.ParseRedaction's rules, ';'-separated
	RecordAnswers  bool          // record.Options.Answers, for Record
}

// DefaultAddr is Config.Addr's default.
const DefaultAddr = "127.0.0.1:7070"

// DefaultConfig returns the Config whose every field is its default,
// those the reactor defaults taken from reactor.DefaultOptions.
func DefaultConfig() Config {
	r := reactor.DefaultOptions()
	return Config{
		Addr:             DefaultAddr,
		GatewayMaxConns:  r.MaxConns,
		MaxFrame:         r.Limits.MaxFrameSize,
		MaxConns:         r.MaxConns,
		MaxInflight:      r.MaxInflight,
		MaxOutbound:      r.MaxOutbound,
		MaxSubscriptions: r.MaxSubscriptions,
		SubscriberQueue:  r.SubscriberQueue,
		SlowSubscriber:   "drop",
		FrameTimeout:     r.FrameTimeout,
		IdleTimeout:      r.IdleTimeout,
		KeepAlive:        r.KeepAlive,
		KeepAliveTimeout: r.KeepAliveTimeout,
		WriteTimeout:     r.WriteTimeout,
		MaxConnAge:       r.MaxConnAge,
		MaxConnAgeGrace:  r.MaxConnAgeGrace,
		HandshakeTimeout: r.HandshakeTimeout,
		DrainTimeout:     10 * time.Second,
		CompressMin:      r.CompressMin,
		LogLevel:         "info",
		LogFormat:        "text",
		UpgradeTimeout:   DefaultUpgradeTimeout,
		TLSClientAuth:    "require",
		Weight:           1,
		EtcdTTL:          etcd.DefaultTTL,
	}
}

// A Setting is one of the daemon's settings: a field of Config, rpcd
// serve's flag -Key, the environment variable Env and the configuration
// file's key Key.
type Setting struct {
	Key     string // the file's key and the flag's name: "max-conns"
	Env     string // the environment variable: "RPCD_MAX_CONNS"
	Field   string // Config's field: "MaxConns"
	Default string // DefaultConfig's value, as the flag prints it: "10000"
	Group   string // the heading it is listed under: "Limits"
	// Help is one line. A word in backquotes names the value
	// (flag.UnquoteUsage); a value that is a file to read is "`file`",
	// which has the setting take a systemd credential too.
	Help string

	ptr func(*Config) any
}

// settings is the table, in the order docs/configuration.md lists it.
var settings = []Setting{
	{Group: "Listening", Key: "addr", ptr: func(c *Config) any { return &c.Addr }, Help: "`address` to listen on: host:port (port 0 picks one), or unix:///path"},
	{Group: "Listening", Key: "gateway", ptr: func(c *Config) any { return &c.Gateway }, Help: "also serve the routes over HTTP on this `address`: HTTP/JSON (POST /rpc/Controller/Action), JSON-RPC 2.0 (/jsonrpc), rpcd over WebSocket (/ws), OpenAPI (/openapi.json); empty for none (docs/gateway.md)"},
	{Group: "Listening", Key: "gateway-max-conns", ptr: func(c *Config) any { return &c.GatewayMaxConns }, Help: "with -gateway: most gateway connections open at once; past it, new ones wait to be accepted"},
	{Group: "Listening", Key: "gateway-cors", ptr: func(c *Config) any { return &c.GatewayCORS }, Help: "with -gateway: let pages of these `origins` call it from a browser (CORS): scheme://host[:port],... or * for any; /ws then takes WebSockets from them and from its own origin alone; empty for none (docs/gateway.md)"},
	{Group: "Listening", Key: "gateway-cors-credentials", ptr: func(c *Config) any { return &c.GatewayCORSCred }, Help: "with -gateway-cors: let those pages send the credentials their browser keeps for the gateway (cookies, a TLS client certificate); not with *"},
	{Group: "Listening", Key: "admin", ptr: func(c *Config) any { return &c.Admin }, Help: "serve metrics (/metrics), pprof, /healthz, /readyz and a live page (/) over HTTP on this `address`; empty for none (docs/operating.md)"},
	{Group: "Listening", Key: "loops", ptr: func(c *Config) any { return &c.Loops }, Help: "event loops; 0 means GOMAXPROCS, or one fewer (at least 1) with -gateway"},

	{Group: "Limits", Key: "max-frame", ptr: func(c *Config) any { return &c.MaxFrame }, Help: "largest frame read or written, header included, in `bytes`; also bounds gateway bodies"},
	{Group: "Limits", Key: "max-conns", ptr: func(c *Config) any { return &c.MaxConns }, Help: "most connections open at once; past it, new ones get a GoAway"},
	{Group: "Limits", Key: "max-inflight", ptr: func(c *Config) any { return &c.MaxInflight }, Help: "blocking calls in flight per connection"},
	{Group: "Limits", Key: "max-outbound", ptr: func(c *Config) any { return &c.MaxOutbound }, Help: "unsent output per connection, in `bytes`, past which it stops being read until its peer reads"},
	{Group: "Limits", Key: "max-subscriptions", ptr: func(c *Config) any { return &c.MaxSubscriptions }, Help: "publish/subscribe: subscriptions per connection"},
	{Group: "Limits", Key: "subscriber-queue", ptr: func(c *Config) any { return &c.SubscriberQueue }, Help: "publish/subscribe: `bytes` a subscriber may have waiting before -slow-subscriber applies"},
	{Group: "Limits", Key: "slow-subscriber", ptr: func(c *Config) any { return &c.SlowSubscriber }, Help: "publish/subscribe: what a full subscriber queue does: `drop` its messages or cutoff the subscriber"},
	{Group: "Limits", Key: "frame-timeout", ptr: func(c *Config) any { return &c.FrameTimeout }, Help: "longest time from a frame's first byte to its last (the gateway's, to read a request)"},
	{Group: "Limits", Key: "idle-timeout", ptr: func(c *Config) any { return &c.IdleTimeout }, Help: "close connections that send nothing for this long; 0 means never: keep-alive pings find dead ones (the gateway's keep-alive: 0 means 2m)"},
	{Group: "Limits", Key: "keepalive", ptr: func(c *Config) any { return &c.KeepAlive }, Help: "ping a connection silent for this long; negative never"},
	{Group: "Limits", Key: "keepalive-timeout", ptr: func(c *Config) any { return &c.KeepAliveTimeout }, Help: "close a connection that does not answer a ping within this"},
	{Group: "Limits", Key: "write-timeout", ptr: func(c *Config) any { return &c.WriteTimeout }, Help: "cut off a connection whose peer reads none of its output for this long"},
	{Group: "Limits", Key: "max-conn-age", ptr: func(c *Config) any { return &c.MaxConnAge }, Help: "send a connection this old (give or take a tenth at random) a GoAway, so that its client dials again and, behind a load balancer, may reach another server; 0 means never"},
	{Group: "Limits", Key: "max-conn-age-grace", ptr: func(c *Config) any { return &c.MaxConnAgeGrace }, Help: "with -max-conn-age: close a connection this long after its GoAway, with what it still runs; negative never"},
	{Group: "Limits", Key: "handshake-timeout", ptr: func(c *Config) any { return &c.HandshakeTimeout }, Help: "with authentication or TLS: how long a connection has to complete it"},
	{Group: "Limits", Key: "drain-timeout", ptr: func(c *Config) any { return &c.DrainTimeout }, Help: "how long a shutdown waits for the calls in flight"},
	{Group: "Limits", Key: "rate-limit", ptr: func(c *Config) any { return &c.RateLimit }, Help: "hold routes to rates, as `ROUTE=RATE[:BURST],...` in calls a second (burst: at once, default a second's worth); route * is every route not listed, each on its own; past it a call gets ResourceExhausted"},
	{Group: "Limits", Key: "compress-min", ptr: func(c *Config) any { return &c.CompressMin }, Help: "smallest reply payload compressed, in `bytes`, for a client that asks (zstd or gzip; on the gateway, by Accept-Encoding); negative turns compression off"},

	{Group: "Logs", Key: "log-level", ptr: func(c *Config) any { return &c.LogLevel }, Help: "log `level`: debug, info, warn or error"},
	{Group: "Logs", Key: "log-format", ptr: func(c *Config) any { return &c.LogFormat }, Help: "log `format`: text or json"},

	{Group: "Upgrades", Key: "pid-file", ptr: func(c *Config) any { return &c.PIDFile }, Help: "write the serving process's pid to this `path` once it serves (after an upgrade, the new process's); empty for none"},
	{Group: "Upgrades", Key: "upgrade-timeout", ptr: func(c *Config) any { return &c.UpgradeTimeout }, Help: "how long the new process of an upgrade (SIGUSR2, rpcd upgrade) has to serve before it is killed and the old one serves on"},

	{Group: "Security", Key: "tls-cert", ptr: func(c *Config) any { return &c.TLSCert }, Help: "serve TLS with this certificate (PEM `file`); with -tls-key"},
	{Group: "Security", Key: "tls-key", ptr: func(c *Config) any { return &c.TLSKey }, Help: "the certificate's private key (PEM `file`)"},
	{Group: "Security", Key: "tls-client-ca", ptr: func(c *Config) any { return &c.TLSClientCA }, Help: "verify client certificates against these CAs (PEM `file`): mutual TLS"},
	{Group: "Security", Key: "tls-client-auth", ptr: func(c *Config) any { return &c.TLSClientAuth }, Help: "with -tls-client-ca: `require` a client certificate, or verify-if-given"},
	{Group: "Security", Key: "auth-tokens", ptr: func(c *Config) any { return &c.AuthTokens }, Help: "require a Hello with a token from this `file`: one per line, \"TOKEN SUBJECT [ROLE,...]\""},
	{Group: "Security", Key: "auth-hmac-key", ptr: func(c *Config) any { return &c.AuthHMACKey }, Help: "require a Hello with a token signed with the key in this `file` (see rpcd token)"},
	{Group: "Security", Key: "auth-require", ptr: func(c *Config) any { return &c.AuthRequire }, Help: "authorize routes by role: `ROUTE=ROLE[|ROLE...],...`; routes not listed are open to any identity"},
	{Group: "Security", Key: "auth-topics", ptr: func(c *Config) any { return &c.AuthTopics }, Help: "who may publish and subscribe where: `RULE;...`, each pub:PATTERN=ROLE[|ROLE...], sub:..., deny-pub:... or deny-sub:... (role * is every connection); with any rule, the rest is refused (docs/two-way.md)"},

	{Group: "Etcd", Key: "etcd", ptr: func(c *Config) any { return &c.Etcd }, Help: "register in etcd at these `endpoints` (host:port, comma-separated) as a node of -service; empty for none (docs/scale-out.md)"},
	{Group: "Etcd", Key: "service", ptr: func(c *Config) any { return &c.Service }, Help: "with -etcd: the service `name` clients dial as etcd://ENDPOINTS/NAME"},
	{Group: "Etcd", Key: "advertise", ptr: func(c *Config) any { return &c.Advertise }, Help: "with -etcd: the `address` clients dial; empty means the address serve is bound to (which must then not be 0.0.0.0 or ::)"},
	{Group: "Etcd", Key: "weight", ptr: func(c *Config) any { return &c.Weight }, Help: "with -etcd: this node's share of calls relative to the others' (1 to 100)"},
	{Group: "Etcd", Key: "meta", ptr: func(c *Config) any { return &c.Meta }, Help: "with -etcd: metadata listed with the node, as `key=value,...`"},
	{Group: "Etcd", Key: "zone", ptr: func(c *Config) any { return &c.Zone }, Help: "with -etcd: the node's `zone`, listed as its metadata zone=...; clients in the same zone prefer it (docs/scale-out.md)"},
	{Group: "Etcd", Key: "etcd-ttl", ptr: func(c *Config) any { return &c.EtcdTTL }, Help: "with -etcd: the lease's time to live: how long a node that died stays listed"},
	{Group: "Etcd", Key: "etcd-tls", ptr: func(c *Config) any { return &c.EtcdTLS }, Help: "speak TLS to etcd, trusting the system's CAs (implied by -etcd-cacert and -etcd-cert; https:// endpoints speak TLS anyway)"},
	{Group: "Etcd", Key: "etcd-cacert", ptr: func(c *Config) any { return &c.EtcdCACert }, Help: "trust the etcd certificates these CAs sign (PEM `file`) instead of the system's"},
	{Group: "Etcd", Key: "etcd-cert", ptr: func(c *Config) any { return &c.EtcdCert }, Help: "present this client certificate (PEM `file`) to etcd; with -etcd-key"},
	{Group: "Etcd", Key: "etcd-key", ptr: func(c *Config) any { return &c.EtcdKey }, Help: "the etcd client certificate's private key (PEM `file`)"},
	{Group: "Etcd", Key: "etcd-user", ptr: func(c *Config) any { return &c.EtcdUser }, Help: "authenticate to etcd as this `user`; with -etcd-password-file"},
	{Group: "Etcd", Key: "etcd-password-file", ptr: func(c *Config) any { return &c.EtcdPasswordFile }, Help: "the etcd user's password, the first line of this `file`"},

	{Group: "Admin", Key: "admin-token-file", ptr: func(c *Config) any { return &c.AdminTokenFile }, Help: "with -admin: require the bearer token on the first line of this `file` on every admin path but /healthz and /readyz (Authorization: Bearer TOKEN)"},
	{Group: "Admin", Key: "admin-tls-cert", ptr: func(c *Config) any { return &c.AdminTLSCert }, Help: "with -admin: serve the admin listener over HTTPS with this certificate (PEM `file`); with -admin-tls-key"},
	{Group: "Admin", Key: "admin-tls-key", ptr: func(c *Config) any { return &c.AdminTLSKey }, Help: "the admin certificate's private key (PEM `file`)"},
	{Group: "Admin", Key: "admin-client-ca", ptr: func(c *Config) any { return &c.AdminClientCA }, Help: "with -admin-tls-cert: let a client certificate these CAs sign (PEM `file`) authenticate on the admin listener: mutual TLS (with -admin-token-file, either will do)"},
	{Group: "Admin", Key: "record-dir", ptr: func(c *Config) any { return &c.RecordDir }, Help: "write the recordings the admin listener starts (POST /record/start) in this `directory`, named by the server; empty for the system's temporary directory"},
	{Group: "Admin", Key: "record", ptr: func(c *Config) any { return &c.Record }, Help: "record the traffic from the start to this `file` (docs/recording.md), which must not exist; empty for none"},
	{Group: "Admin", Key: "record-duration", ptr: func(c *Config) any { return &c.RecordDuration }, Help: "with -record: stop recording after this long; 0 means when the server stops or -record-max-bytes is reached"},
	{Group: "Admin", Key: "record-max-bytes", ptr: func(c *Config) any { return &c.RecordMaxBytes }, Help: "with -record: stop recording once the file holds this many `bytes`; 0 means 1 GiB"},
	{Group: "Admin", Key: "record-sample", ptr: func(c *Config) any { return &c.RecordSample }, Help: "with -record: the `fraction` of connections recorded, in (0, 1], each with all its calls; 0 means 1"},
	{Group: "Admin", Key: "record-routes", ptr: func(c *Config) any { return &c.RecordRoutes }, Help: "with -record: record only the calls to these `routes` (comma-separated patterns, docs/recording.md); empty for all"},
	{Group: "Admin", Key: "record-redact", ptr: func(c *Config) any { return &c.RecordRedact }, Help: "with -record: what to do with payloads by route, `ROUTE=keep|drop|replace:TEXT;...`, the first that matches applying; payloads not matched are kept"},
	{Group: "Admin", Key: "record-answers", ptr: func(c *Config) any { return &c.RecordAnswers }, Help: "with -record: record the answers (Response, Error) too, for rpcd bench -replay -compare"},
}

// EtcdAccess are the keys of the settings that reach a secured etcd,
// which rpcd's clients take too for an etcd:// address.
var EtcdAccess = []string{"etcd-tls", "etcd-cacert", "etcd-cert", "etcd-key", "etcd-user", "etcd-password-file"}

func init() {
	d := DefaultConfig()
	cv := reflect.ValueOf(&d).Elem()
	fields := map[uintptr]string{}
	for i := range cv.NumField() {
		fields[cv.Field(i).Addr().Pointer()] = cv.Type().Field(i).Name
	}
	for i := range settings {
		s := &settings[i]
		s.Env = EnvName(s.Key)
		s.Field = fields[reflect.ValueOf(s.ptr(&d)).Pointer()]
		s.Default = s.Value(&d).String()
	}
}

// Settings returns the table of the settings, in the order
// docs/configuration.md lists them: every field of Config once.
func Settings() []Setting { return append([]Setting(nil), settings...) }

// Lookup returns the setting of key, and whether there is one.
func Lookup(key string) (Setting, bool) {
	for _, s := range settings {
		if s.Key == key {
			return s, true
		}
	}
	return Setting{}, false
}

// EnvPrefix begins the environment variable of every setting.
const EnvPrefix = "RPCD_"

// EnvName returns the environment variable of the setting or flag name:
// EnvPrefix and the name in upper case, '-' as '_' (RPCD_MAX_CONNS).
func EnvName(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Value returns the flag.Value that reads and sets s in c: a
// flag.Getter of the field's type, as flag's own.
func (s Setting) Value(c *Config) flag.Value {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	s.define(fs, c, "")
	return fs.Lookup(s.Key).Value
}

// define defines s on fs as a flag that sets it in c, with usage before
// the help.
func (s Setting) define(fs *flag.FlagSet, c *Config, usage string) {
	usage += s.Help
	switch p := s.ptr(c).(type) {
	case *string:
		fs.StringVar(p, s.Key, *p, usage)
	case *int:
		fs.IntVar(p, s.Key, *p, usage)
	case *time.Duration:
		fs.DurationVar(p, s.Key, *p, usage)
	case *bool:
		fs.BoolVar(p, s.Key, *p, usage)
	case *int64:
		fs.Int64Var(p, s.Key, *p, usage)
	case *float64:
		fs.Float64Var(p, s.Key, *p, usage)
	default:
		panic(fmt.Sprintf("daemon: setting %s has a field of type %T", s.Key, p))
	}
}

// DefineFlags defines a flag on fs for each setting, or for each of keys
// if any are given, that sets it in c; c's values are the flags'
// defaults. A flag's usage is prefix and the setting's help.
func DefineFlags(fs *flag.FlagSet, c *Config, prefix string, keys ...string) {
	for _, s := range settings {
		if len(keys) == 0 || slices.Contains(keys, s.Key) {
			s.define(fs, c, prefix)
		}
	}
}
