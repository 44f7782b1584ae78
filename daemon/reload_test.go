package daemon

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
)

// writeFile writes text to path, replacing it whole (a rename, as an
// operator's tools do), so that no reader sees it half written.
func writeFile(t testing.TB, path, text string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// dialAs dials addr with token (none if empty), never retrying; nil
// options for TLS are plain TCP.
func dialAs(t *testing.T, addr, token string, tlsConfig *tls.Config) (*client.Client, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	opts := client.Options{MaxRetries: -1, TLS: tlsConfig}
	if token != "" {
		opts.Credentials = &client.Credentials{Secret: []byte(token)}
	}
	c, err := client.Dial(ctx, addr, opts)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// ping calls Sys/Ping on c.
func ping(c *client.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	return c.Call(ctx, "Sys/Ping", nil, nil)
}

// reloadRig is a daemon serving a token file, with its gateway and admin
// listener, and its log.
type reloadRig struct {
	d      *Daemon
	cfg    Config
	tokens string // the token file
	log    *syncBuffer
}

func newReloadRig(t *testing.T, tokens string, edit func(*Config)) *reloadRig {
	t.Helper()
	r := &reloadRig{tokens: filepath.Join(t.TempDir(), "tokens"), log: &syncBuffer{}}
	writeFile(t, r.tokens, tokens)
	r.cfg = DefaultConfig()
	r.cfg.Addr, r.cfg.Gateway, r.cfg.Admin, r.cfg.AuthTokens = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", r.tokens
	if edit != nil {
		edit(&r.cfg)
	}
	var err error
	if r.d, err = New(r.cfg, WithLogOutput(r.log)); err != nil {
		t.Fatal(err)
	}
	run(t, r.d)
	return r
}

// gatewayCall posts Sys/Ping to the gateway with token as a bearer, and
// returns the status.
func (r *reloadRig) gatewayCall(t *testing.T, token string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+r.d.GatewayAddr().String()+"/rpc/Sys/Ping", strings.NewReader("null"))
	req.Header.Set("Authorization", "Bearer "+token)
	hc := &http.Client{Timeout: waitTimeout, Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// metrics returns the rpcd_config_ series of the admin listener's
// /metrics.
func (r *reloadRig) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	hc := &http.Client{Timeout: waitTimeout, Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://" + r.d.AdminAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	for _, m := range regexp.MustCompile(`(?m)^(rpcd_config_\w+) (\S+)$`).FindAllStringSubmatch(string(b), -1) {
		out[m[1]], _ = strconv.ParseFloat(m[2], 64)
	}
	return out
}

// TestReloadTokens: a token added by a reload authenticates a new
// connection, on the RPC port and the gateway, and a token removed is
// refused on both; a connection that authenticated with it before keeps
// its identity. A configuration with mistakes changes nothing, and every
// mistake is logged and returned. /metrics follows the generation and the
// refusals.
func TestReloadTokens(t *testing.T) {
	r := newReloadRig(t, "tok-a alice\n", nil)
	addr := r.d.Addr().String()
	old, err := dialAs(t, addr, "tok-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dialAs(t, addr, "tok-b", nil); !errors.Is(err, handler.ErrUnauthenticated) {
		t.Fatalf("tok-b before the reload: %v, want refused", err)
	}
	m := r.metrics(t)
	if m["rpcd_config_generation"] != 1 || m["rpcd_config_reloads_failed_total"] != 0 {
		t.Fatalf("metrics at start: %v", m)
	}
	start := m["rpcd_config_last_load_timestamp_seconds"]

	writeFile(t, r.tokens, "tok-b bob\n")
	got, err := r.d.Reload(r.cfg)
	if err != nil || got.Generation != 2 || len(got.Changed) != 0 || len(got.NeedUpgrade) != 0 {
		t.Fatalf("Reload: %+v, %v; want generation 2, nothing changed but the file", got, err)
	}
	c, err := dialAs(t, addr, "tok-b", nil)
	if err != nil {
		t.Fatalf("tok-b on a new connection after the reload: %v", err)
	}
	if err := ping(c); err != nil {
		t.Fatal(err)
	}
	if _, err := dialAs(t, addr, "tok-a", nil); !errors.Is(err, handler.ErrUnauthenticated) {
		t.Fatalf("tok-a on a new connection after the reload: %v, want refused", err)
	}
	if err := ping(old); err != nil {
		t.Errorf("the connection tok-a opened before the reload: %v", err)
	}
	if a, b := r.gatewayCall(t, "tok-a"), r.gatewayCall(t, "tok-b"); a != 401 || b != 200 {
		t.Errorf("the gateway: tok-a %d, tok-b %d; want 401 and 200", a, b)
	}
	m = r.metrics(t)
	if m["rpcd_config_generation"] != 2 || m["rpcd_config_last_load_timestamp_seconds"] < start {
		t.Errorf("metrics after the reload: %v (loaded at %v at start)", m, start)
	}

	bad := r.cfg
	missing := filepath.Join(t.TempDir(), "missing")
	bad.AuthTokens, bad.RateLimit, bad.LogLevel = missing, "Sys/Ping", "loud"
	got, err = r.d.Reload(bad)
	want := []string{
		`rate-limit "Sys/Ping" is not ROUTE=RATE[:BURST]`,
		`log-level is "loud", want debug, info, warn or error`,
		"auth-tokens: reading tokens: open " + missing + ": no such file or directory",
	}
	var msgs []string
	for _, e := range unjoin(err) {
		var ce *ConfigError
		if !errors.As(e, &ce) {
			t.Fatalf("%T %v, want a *ConfigError", e, e)
		}
		msgs = append(msgs, ce.Text(nil))
	}
	if strings.Join(msgs, "\n") != strings.Join(want, "\n") || got.Generation != 2 {
		t.Errorf("Reload of a bad configuration: generation %d,\n%s\nwant generation 2,\n%s", got.Generation, strings.Join(msgs, "\n"), strings.Join(want, "\n"))
	}
	for _, line := range append(want, "rpcd: reload refused; the running configuration is kept") {
		if q := strconv.Quote(line); !strings.Contains(r.log.String(), q[1:len(q)-1]) {
			t.Errorf("the log lacks %q:\n%s", line, r.log.String())
		}
	}
	if _, err := dialAs(t, addr, "tok-b", nil); err != nil {
		t.Errorf("tok-b after a refused reload: %v", err)
	}
	if _, err := dialAs(t, addr, "tok-a", nil); err == nil {
		t.Error("tok-a after a refused reload: accepted")
	}
	if r.d.Config().LogLevel != "info" || r.d.Logger().Enabled(context.Background(), slog.LevelDebug) {
		t.Error("a refused reload changed the log level")
	}
	m = r.metrics(t)
	if m["rpcd_config_generation"] != 2 || m["rpcd_config_reloads_failed_total"] != 1 {
		t.Errorf("metrics after a refused reload: %v", m)
	}
}

// TestReloadRateLimitAndRoles: rate limits and roles added, changed and
// removed by reloads hold the next calls; a reload that leaves a limit as
// it was keeps its bucket.
func TestReloadRateLimitAndRoles(t *testing.T) {
	r := newReloadRig(t, "tok-a alice\ntok-o olga ops\n", nil)
	alice, err := dialAs(t, r.d.Addr().String(), "tok-a", nil)
	if err != nil {
		t.Fatal(err)
	}
	taken := func(n int) int {
		t.Helper()
		ok := 0
		for range n {
			switch err := ping(alice); {
			case err == nil:
				ok++
			case !errors.Is(err, handler.ErrResourceExhausted):
				t.Fatalf("a call refused with %v, want ResourceExhausted", err)
			}
		}
		return ok
	}
	reload := func(limits, roles string) Reloaded {
		t.Helper()
		cfg := r.cfg
		cfg.RateLimit, cfg.AuthRequire = limits, roles
		got, err := r.d.Reload(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if n := taken(5); n != 5 {
		t.Fatalf("no limit: %d of 5 calls taken", n)
	}
	if got := reload("Sys/Ping=0.001:2", ""); !slices.Equal(got.Changed, []string{"rate-limit"}) {
		t.Errorf("Changed %q, want [rate-limit]", got.Changed)
	}
	if n := taken(5); n != 2 {
		t.Fatalf("a limit of 2 at once: %d of 5 calls taken", n)
	}
	reload("Sys/Ping=0.001:2", "")
	if n := taken(3); n != 0 {
		t.Fatalf("the same limit reloaded: %d of 3 calls taken, want 0 (its bucket kept)", n)
	}
	reload("Sys/Ping=0.001:4", "")
	if n := taken(5); n != 4 {
		t.Fatalf("a limit of 4 at once: %d of 5 calls taken", n)
	}
	reload("", "Sys/Ping=ops")
	if err := ping(alice); !errors.Is(err, handler.ErrPermissionDenied) {
		t.Fatalf("alice under Sys/Ping=ops: %v, want PermissionDenied", err)
	}
	olga, err := dialAs(t, r.d.Addr().String(), "tok-o", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ping(olga); err != nil {
		t.Fatalf("olga, of ops, under Sys/Ping=ops: %v", err)
	}
	reload("", "")
	if n := taken(5); n != 5 {
		t.Fatalf("limits and roles removed: %d of 5 calls taken", n)
	}
}

// TestReloadTopics: topic rules added by a reload hold the connections
// that subscribe first after it.
func TestReloadTopics(t *testing.T) {
	r := newReloadRig(t, "tok-a alice reader\n", nil)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	subscribe := func() error {
		c, err := dialAs(t, r.d.Addr().String(), "tok-a", nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.SubscribeFunc(ctx, "secrets.>", func(client.Message) {})
		return err
	}
	if err := subscribe(); err != nil {
		t.Fatalf("no topic rules: %v", err)
	}
	cfg := r.cfg
	cfg.AuthTopics = "sub:orders.>=reader"
	if _, err := r.d.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if err := subscribe(); !errors.Is(err, handler.ErrPermissionDenied) {
		t.Fatalf("secrets.> under sub:orders.>=reader: %v, want PermissionDenied", err)
	}
}

// TestReloadLogLevel: the log level changed by a reload is the logger's
// at once.
func TestReloadLogLevel(t *testing.T) {
	r := newReloadRig(t, "tok-a alice\n", nil)
	r.d.Logger().Debug("rpcd-test: before")
	cfg := r.cfg
	cfg.LogLevel = "debug"
	if got, err := r.d.Reload(cfg); err != nil || !slices.Equal(got.Changed, []string{"log-level"}) {
		t.Fatalf("Reload: %+v, %v", got, err)
	}
	r.d.Logger().Debug("rpcd-test: after")
	cfg.LogLevel = "error"
	if _, err := r.d.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	r.d.Logger().Warn("rpcd-test: at error")
	log := r.log.String()
	if strings.Contains(log, "rpcd-test: before") || !strings.Contains(log, "rpcd-test: after") || strings.Contains(log, "rpcd-test: at error") {
		t.Errorf("debug at info, debug at debug, warn at error: want only the second logged:\n%s", log)
	}
	if r.d.Config().LogLevel != "error" {
		t.Errorf("Config().LogLevel %q, want error", r.d.Config().LogLevel)
	}
}

// TestReloadNeedsUpgrade: settings that cannot change while the daemon
// serves are named, logged and kept as they run, beside the live ones
// applied; turning TLS or authentication on is one of them.
func TestReloadNeedsUpgrade(t *testing.T) {
	log := &syncBuffer{}
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	d, err := New(cfg, WithLogOutput(log))
	if err != nil {
		t.Fatal(err)
	}
	run(t, d)
	dir := t.TempDir()
	certFile, keyFile := writeCert(t, dir, "a")
	tokens := filepath.Join(dir, "tokens")
	writeFile(t, tokens, "tok-a alice\n")
	next := cfg
	next.MaxConns, next.LogFormat, next.RateLimit = 7, "json", "Sys/Ping=1000"
	next.TLSCert, next.TLSKey, next.AuthTokens = certFile, keyFile, tokens
	got, err := d.Reload(next)
	if err != nil {
		t.Fatal(err)
	}
	wantUp := []string{"max-conns", "log-format", "tls-cert", "tls-key", "auth-tokens"}
	if !slices.Equal(got.NeedUpgrade, wantUp) || !slices.Equal(got.Changed, []string{"rate-limit"}) {
		t.Errorf("NeedUpgrade %q, Changed %q; want %q and [rate-limit]", got.NeedUpgrade, got.Changed, wantUp)
	}
	if !strings.Contains(log.String(), `msg="rpcd: settings changed that need an upgrade; their old values are kept" settings=max-conns,log-format,tls-cert,tls-key,auth-tokens`) {
		t.Errorf("no warning naming them:\n%s", log.String())
	}
	running := d.Config()
	if running.MaxConns != cfg.MaxConns || running.TLSCert != "" || running.AuthTokens != "" || running.RateLimit != "Sys/Ping=1000" {
		t.Errorf("the running Config: %+v", running)
	}
	c, err := dialAs(t, d.Addr().String(), "", nil) // plain TCP, no token: as before
	if err != nil {
		t.Fatal(err)
	}
	if err := ping(c); err != nil {
		t.Fatal(err)
	}
}

// TestReloadTLS: a certificate replaced by a reload is the one new
// connections get, on the RPC port and the gateway (HTTP/2 still offered);
// a connection open before keeps serving.
func TestReloadTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writeCert(t, dir, "first")
	cfg := DefaultConfig()
	cfg.Addr, cfg.Gateway, cfg.TLSCert, cfg.TLSKey = "127.0.0.1:0", "127.0.0.1:0", certFile, keyFile
	d, err := New(cfg, WithLogOutput(&syncBuffer{}))
	if err != nil {
		t.Fatal(err)
	}
	run(t, d)
	trusted := x509.NewCertPool()
	trust := func() {
		b, err := os.ReadFile(certFile)
		if err != nil {
			t.Fatal(err)
		}
		trusted.AppendCertsFromPEM(b)
	}
	trust()
	served := func() (rpc, gw string) {
		t.Helper()
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: waitTimeout}, "tcp", d.Addr().String(), &tls.Config{RootCAs: trusted})
		if err != nil {
			t.Fatal(err)
		}
		rpc = conn.ConnectionState().PeerCertificates[0].Subject.CommonName
		conn.Close()
		hc := &http.Client{Timeout: waitTimeout, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: trusted}, ForceAttemptHTTP2: true}}
		defer hc.CloseIdleConnections()
		resp, err := hc.Post("https://"+d.GatewayAddr().String()+"/rpc/Sys/Ping", "application/json", strings.NewReader("null"))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
			t.Errorf("the gateway: %s over %s, want 200 over HTTP/2", resp.Status, resp.Proto)
		}
		return rpc, resp.TLS.PeerCertificates[0].Subject.CommonName
	}
	if rpc, gw := served(); rpc != "first" || gw != "first" {
		t.Fatalf("at start: %s and %s, want first", rpc, gw)
	}
	old, err := dialAs(t, d.Addr().String(), "", &tls.Config{RootCAs: trusted})
	if err != nil {
		t.Fatal(err)
	}
	writeCert(t, dir, "second") // the same files
	trust()
	if _, err := d.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if rpc, gw := served(); rpc != "second" || gw != "second" {
		t.Errorf("after the reload: %s and %s, want second", rpc, gw)
	}
	if err := ping(old); err != nil {
		t.Errorf("the connection of the first certificate: %v", err)
	}
}

// writeCert writes a self-signed certificate for 127.0.0.1 named cn, and
// its key, as dir's cert.pem and key.pem.
func writeCert(t *testing.T, dir, cn string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeFile(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	writeFile(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})))
	return certFile, keyFile
}

// TestRunSignalsReload: SIGHUP reloads the configuration read again as it
// was loaded (WithReloadFrom): the file's new token works, the daemon
// serves on, and SIGTERM still drains.
func TestRunSignalsReload(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	writeFile(t, tokens, "tok-a alice\n")
	file := filepath.Join(dir, "rpcd.yaml")
	writeFile(t, file, "auth-tokens: "+tokens+"\n")
	fs := flag.NewFlagSet("rpcd serve", flag.ContinueOnError) // as rpcd serve's
	cfg := DefaultConfig()
	DefineFlags(fs, &cfg, "")
	fs.String(FileFlag, "", "the configuration `file`")
	if err := fs.Parse([]string{"-config", file, "-addr", "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	loaded := Load(fs, nil)
	if loaded.Err != nil || cfg.AuthTokens != tokens {
		t.Fatalf("Load: %v; auth-tokens %q", loaded.Err, cfg.AuthTokens)
	}
	log := &syncBuffer{}
	d, err := New(cfg, WithLogOutput(log), WithReloadFrom(loaded))
	if err != nil {
		t.Fatal(err)
	}
	sigs := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() { done <- d.RunSignals(sigs) }()
	select {
	case <-d.Ready():
	case err := <-done:
		t.Fatalf("RunSignals returned before serving: %v", err)
	case <-time.After(waitTimeout):
		t.Fatal("no serving")
	}
	writeFile(t, tokens, "tok-b bob\n")
	writeFile(t, file, "auth-tokens: "+tokens+"\nrate-limit: Sys/Ping=1000\n")
	sigs <- syscall.SIGHUP
	for deadline := time.Now().Add(waitTimeout); d.configStatus().Generation != 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no reload on SIGHUP; log:\n%s", log.String())
		}
	}
	if _, err := dialAs(t, d.Addr().String(), "tok-b", nil); err != nil {
		t.Errorf("tok-b after SIGHUP: %v", err)
	}
	if got := d.Config().RateLimit; got != "Sys/Ping=1000" {
		t.Errorf("rate-limit after SIGHUP %q, want the file's", got)
	}
	if !strings.Contains(log.String(), `msg="rpcd: configuration reloaded" generation=2 changed=rate-limit`) {
		t.Errorf("no line of the reload:\n%s", log.String())
	}
	sigs <- syscall.SIGTERM
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("RunSignals after SIGTERM: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("no drain on SIGTERM after a SIGHUP")
	}
}

// TestLoadedAgain: Again reads the file and the credentials as they are
// now, with the command line and the environment as they were, and names
// a flag that is no setting whose value changed; a file that no longer
// parses is its Err.
func TestLoadedAgain(t *testing.T) {
	file := writeConfig(t, "rate-limit: Sys/Ping=10\nlog-level: debug\nmax-conns: 5\nledger: a\n")
	fs := flag.NewFlagSet("prog", flag.ContinueOnError) // a program's own, with some of the settings
	fs.SetOutput(io.Discard)
	start := DefaultConfig()
	DefineFlags(fs, &start, "", "rate-limit", "log-level", "max-conns", "idle-timeout")
	fs.String(FileFlag, "", "the configuration `file`")
	fs.String("ledger", "", "a command's own flag")
	if err := fs.Parse([]string{"-config", file, "-log-level", "warn"}); err != nil {
		t.Fatal(err)
	}
	env := []string{"RPCD_MAX_CONNS=77"}
	l := Load(fs, env)
	if l.Err != nil {
		t.Fatal(l.Err)
	}
	base := start
	base.Zone, base.Addr = "kept", "127.0.0.1:1" // settings the flag set does not define: base's
	writeFile(t, file, "rate-limit: Sys/Ping=20\nlog-level: debug\nmax-conns: 5\nledger: b\nidle-timeout: 1m\n")
	cfg, again := l.Again(base)
	if again.Err != nil {
		t.Fatal(again.Err)
	}
	if cfg.RateLimit != "Sys/Ping=20" || cfg.LogLevel != "warn" || cfg.MaxConns != 77 || cfg.IdleTimeout != time.Minute || cfg.Addr != base.Addr || cfg.Zone != "kept" {
		t.Errorf("read again: rate-limit %q, log-level %q, max-conns %d, idle-timeout %v, addr %q, zone %q", cfg.RateLimit, cfg.LogLevel, cfg.MaxConns, cfg.IdleTimeout, cfg.Addr, cfg.Zone)
	}
	if !slices.Equal(again.others, []string{"ledger"}) || again.Sources["rate-limit"] != file+":1" {
		t.Errorf("others %q, sources %v", again.others, again.Sources)
	}
	writeFile(t, file, "rate-limit: [\n")
	if _, again := l.Again(base); again.Err == nil || !again.Fatal || !strings.Contains(again.Err.Error(), file) {
		t.Errorf("a file that does not parse: %v, fatal %v", again.Err, again.Fatal)
	}
}

// TestReloadDocs: configuration.md lists the live settings, each once.
func TestReloadDocs(t *testing.T) {
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## What a reload changes\n")
	if !ok {
		t.Fatal(`configuration.md has no section "What a reload changes"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var listed []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\|").FindAllStringSubmatch(section, -1) {
		listed = append(listed, m[1])
	}
	if !slices.Equal(listed, LiveSettings()) {
		t.Errorf("configuration.md lists %q as live, the daemon %q", listed, LiveSettings())
	}
}
