package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/discovery/etcd"
	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/internal/etcdtest"
	"github.com/rpcd/rpcd/internal/leaktest"
	"github.com/rpcd/rpcd/reactor"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// waitTimeout bounds every wait of these tests.
const waitTimeout = 10 * time.Second

// syncBuffer is a log one goroutine writes while another reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// run starts d.Run and waits until it serves; stop ends its context and
// returns Run's error.
func run(t *testing.T, d *Daemon) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case <-d.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("Run returned before serving: %v", err)
	case <-time.After(waitTimeout):
		t.Fatal("Run did not serve")
	}
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(waitTimeout):
				t.Fatal("Run did not return after its context ended")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// TestRunOrder: Run registers the node in etcd once it serves; when its
// context ends it leaves etcd while a call is still in flight, and only
// then answers that call and stops: "draining", "deregistered", the
// call's reply, "stopped", in that order.
func TestRunOrder(t *testing.T) {
	ep := etcdtest.Start(t)
	cfg := DefaultConfig()
	cfg.Addr, cfg.Etcd, cfg.Service, cfg.EtcdTTL = "127.0.0.1:0", ep, "order", 2*time.Second
	var log syncBuffer
	d, err := New(cfg, WithLogOutput(&log))
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	d.Registry().Handle("Test/Hold", handler.Func(func(context.Context, struct{}) (string, error) {
		close(entered)
		<-release
		return "answered", nil
	}), handler.Blocking())
	stop := run(t, d)

	cli, err := etcd.NewClient([]string{ep})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	key := etcd.Key("order", d.Addr().String())
	listed := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		resp, err := cli.Get(ctx, key, clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count == 1
	}
	if !listed() {
		t.Fatalf("the node is not in etcd under %s once Run serves; log:\n%s", key, log.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := client.Dial(ctx, d.Addr().String(), client.Options{MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reply := make(chan string, 1)
	go func() {
		var s string
		if err := c.Call(ctx, "Test/Hold", nil, &s); err != nil {
			s = err.Error()
		}
		reply <- s
	}()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()

	for deadline := time.Now().Add(waitTimeout); listed(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the node is still in etcd while the drain waits for the call; log:\n%s", log.String())
		}
	}
	select {
	case s := <-reply:
		t.Fatalf("the call ended (%q) before it was let return", s)
	case err := <-stopped:
		t.Fatalf("Run returned (%v) with a call in flight", err)
	default:
	}
	close(release)
	if s := <-reply; s != "answered" {
		t.Errorf("the call in flight got %q, want its reply", s)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Run: %v", err)
	}
	text, at := log.String(), -1
	for _, line := range []string{`msg="rpcd: registered"`, `msg="rpcd: serving"`, `msg="rpcd: draining"`, `msg="rpcd: deregistered"`, `msg="rpcd: stopped"`} {
		i := strings.Index(text, line)
		if i < at {
			t.Errorf("the log lacks %s after the line before it:\n%s", line, text)
		}
		at = max(at, i)
	}
}

// TestRunListeners: listeners given (WithListeners) are served, the
// Config's addresses not listened on; Close cuts a drain short.
func TestRunListeners(t *testing.T) {
	var lns []net.Listener
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
	}
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:1" // not listened on
	d, err := New(cfg, WithLogOutput(&syncBuffer{}), WithListeners(Listeners{RPC: lns[0], Gateway: lns[1], Admin: lns[2]}))
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, d)
	for i, a := range []net.Addr{d.Addr(), d.GatewayAddr(), d.AdminAddr()} {
		if a == nil || a.String() != lns[i].Addr().String() {
			t.Errorf("listener %d serves at %v, want %v", i, a, lns[i].Addr())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := client.Dial(ctx, lns[0].Addr().String(), client.Options{MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Call(ctx, "Sys/Ping", nil, nil); err != nil {
		t.Errorf("a call on the given listener: %v", err)
	}
	d.Close()
	if err := stop(); err == nil {
		t.Error("Run closed while serving returned nil, want the drain's error")
	}
}

// TestValidateNamesEveryMistake: Validate reports each bad setting, those
// the reactor judges among them, in one error, each naming its key.
func TestValidateNamesEveryMistake(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Loops, cfg.MaxConns, cfg.MaxFrame, cfg.WriteTimeout = -1, -5, 8, -time.Second
	cfg.DrainTimeout, cfg.LogLevel, cfg.SlowSubscriber, cfg.Weight = 0, "loud", "later", 0
	cfg.Addr, cfg.AuthRequire, cfg.RateLimit = "nonsense", "Math/Sum=admin", "Math/Sum=0"
	err := cfg.Validate()
	want := []string{
		`max-frame is 8, want 0 (the default) or at least 24`,
		`loops is -1, want 0 or more`,
		`max-conns is -5, want 0 or more`,
		`write-timeout is -1s, want 0 or more`,
		`slow-subscriber is "later", want drop or cutoff`,
		`drain-timeout is 0s, want more than 0`,
		`addr is "nonsense", want host:port (port 0 picks one) or unix:///path`,
		`weight is 0, want 1 to 100`,
		`rate-limit Math/Sum: rate "0", want calls a second above 0`,
		`log-level is "loud", want debug, info, warn or error`,
		`auth-require needs a way to authenticate: auth-tokens, auth-hmac-key or tls-client-ca`,
	}
	var got []string
	for _, e := range unjoin(err) {
		var ce *ConfigError
		if !errors.As(e, &ce) {
			t.Fatalf("%T %v, want a *ConfigError", e, e)
		}
		got = append(got, ce.Text(nil))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Validate:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := New(cfg); err == nil || len(unjoin(err)) != len(want) {
		t.Errorf("New: %v, want Validate's %d errors", err, len(want))
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig: %v", err)
	}
	var ce *ConfigError
	if errors.As(unjoin(err)[1], &ce); ce.Error() != "rpcd: loops is -1, want 0 or more" ||
		ce.Text(func(k string) string { return "-" + k }) != "-loops is -1, want 0 or more" || fmt.Sprint(ce.Settings()) != "[loops]" {
		t.Errorf("a ConfigError: %q, %q, %q", ce.Error(), ce.Text(func(k string) string { return "-" + k }), ce.Settings())
	}
}

// TestNewFileMistakes: New reads the files the settings name, and names
// each setting whose file cannot be used, with Validate's mistakes.
func TestNewFileMistakes(t *testing.T) {
	missing := t.TempDir() + "/missing"
	cfg := DefaultConfig()
	cfg.Loops, cfg.AuthTokens, cfg.TLSCert, cfg.TLSKey = -1, missing, missing+".pem", missing+".key"
	_, err := New(cfg)
	var got []string
	for _, e := range unjoin(err) {
		got = append(got, strings.TrimPrefix(e.Error(), "rpcd: "))
	}
	want := []string{
		"loops is -1, want 0 or more",
		"tls-cert: loading the TLS certificate: open " + missing + ".pem: no such file or directory",
		"auth-tokens: reading tokens: open " + missing + ": no such file or directory",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("New:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSettingsTable: every field of Config is one setting, each with its
// variable, its Config field and DefaultConfig's value as its default;
// the settings the reactor takes default to reactor.DefaultOptions'.
func TestSettingsTable(t *testing.T) {
	ct := reflect.TypeFor[Config]()
	fields := map[string]int{}
	keys := map[string]bool{}
	for _, s := range Settings() {
		fields[s.Field]++
		if keys[s.Key] || s.Env != EnvName(s.Key) || s.Help == "" || s.Group == "" {
			t.Errorf("setting %+v: a key twice, or a variable, help or group wrong", s)
		}
		keys[s.Key] = true
		d := DefaultConfig()
		if got := fmt.Sprint(reflect.ValueOf(d).FieldByName(s.Field).Interface()); got != s.Default {
			t.Errorf("setting %s: default %q, DefaultConfig's %s %q", s.Key, s.Default, s.Field, got)
		}
	}
	for i := range ct.NumField() {
		if name := ct.Field(i).Name; fields[name] != 1 {
			t.Errorf("Config.%s is the field of %d settings, want 1", name, fields[name])
		}
	}
	r, d := reactor.DefaultOptions(), DefaultConfig()
	ro := d.reactorOptions()
	ro.Loops, r.Loops = 0, 0
	if !reflect.DeepEqual(ro, reactor.Options{
		Limits: ro.Limits, MaxInflight: r.MaxInflight, MaxConns: r.MaxConns, MaxOutbound: r.MaxOutbound,
		MaxSubscriptions: r.MaxSubscriptions, SubscriberQueue: r.SubscriberQueue, SlowSubscriber: r.SlowSubscriber,
		FrameTimeout: r.FrameTimeout, IdleTimeout: r.IdleTimeout, KeepAlive: r.KeepAlive, KeepAliveTimeout: r.KeepAliveTimeout,
		WriteTimeout: r.WriteTimeout, HandshakeTimeout: r.HandshakeTimeout, CompressMin: r.CompressMin,
		MaxConnAge: r.MaxConnAge, MaxConnAgeGrace: r.MaxConnAgeGrace,
	}) || ro.Limits.MaxFrameSize != r.Limits.MaxFrameSize {
		t.Errorf("DefaultConfig's reactor options %+v are not reactor.DefaultOptions' %+v", ro, r)
	}
}

func TestServingAddr(t *testing.T) {
	log := "time=2026-01-02T03:04:05.000Z level=INFO msg=\"rpcd: serving\" addr=127.0.0.1:40123 loops=2 GOMAXPROCS=2 routes=7\n"
	if got := servingAddr([]byte(log)); got != "127.0.0.1:40123" {
		t.Errorf("servingAddr = %q, want 127.0.0.1:40123", got)
	}
	if got := servingAddr([]byte("time=x level=INFO msg=\"rpcd: draining\" addr=1.2.3.4:5\n")); got != "" {
		t.Errorf("servingAddr of another line = %q, want none", got)
	}
}

// TestReady: Ready says "ready" while the daemon serves, asked at its
// admin listener's port on an unspecified host too; an address without a
// port is a ConfigError, and a listener gone an error. (cmd/rpcd's
// TestProcessHealth sees the 503 of a drain.)
func TestReady(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addr, cfg.Admin = "127.0.0.1:0", "127.0.0.1:0"
	d, err := New(cfg, WithLogOutput(&syncBuffer{}))
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	_, port, _ := net.SplitHostPort(d.AdminAddr().String())
	for _, addr := range []string{d.AdminAddr().String(), "0.0.0.0:" + port, ":" + port} {
		if answer, err := Ready(ctx, addr); answer != "ready" || err != nil {
			t.Errorf("Ready(%s): %q, %v; want ready", addr, answer, err)
		}
	}
	var ce *ConfigError
	if _, err := Ready(ctx, "nonsense"); !errors.As(err, &ce) {
		t.Errorf("Ready(nonsense): %v, want a ConfigError", err)
	}
	_ = stop()
	if _, err := Ready(ctx, d.AdminAddr().String()); err == nil || !strings.HasPrefix(err.Error(), "rpcd: not ready: ") {
		t.Errorf("Ready once stopped: %v, want not ready", err)
	}
}
