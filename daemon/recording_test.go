package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler/builtin"
	"github.com/rpcd/rpcd/proto"
	"github.com/rpcd/rpcd/record"
)

// adminDo sends method to url with body and the headers, and returns the
// status and the body.
func adminDo(t *testing.T, method, url, body string, headers ...string) (int, []byte) {
	t.Helper()
	resp, b := do(t, method, url, body, headers...)
	return resp.StatusCode, b
}

// echoCalls makes n calls to Echo/Packet on d's RPC port, on a
// connection of their own, and returns their payloads.
func echoCalls(t *testing.T, d *Daemon, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := client.Dial(ctx, d.Addr().String(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var sent []string
	for i := range n {
		p := "call-" + string(rune('a'+i%26))
		if reply, err := c.CallRaw(ctx, builtin.EchoPacket, []byte(p), nil); err != nil || string(reply) != p {
			t.Fatalf("call %d: %q, %v", i, reply, err)
		}
		sent = append(sent, p)
	}
	return sent
}

// TestRecordingFromAdmin: a recording started on the admin listener of a
// daemon on loopback holds the calls made meanwhile, with their answers,
// in a file of mode 0600 in record-dir; the status shows it running, then
// its figures; a second start while it runs gets 409; the file is fetched
// once it has ended, and record.Open reads it back.
func TestRecordingFromAdmin(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.RecordDir = dir
	d, addr := runAdmin(t, cfg)
	base := "http://" + addr
	echoCalls(t, d, 3) // before: not recorded

	if code, body := adminDo(t, http.MethodGet, base+RecordFilePath, ""); code != http.StatusNotFound {
		t.Fatalf("GET %s before any recording: %d %s, want 404", RecordFilePath, code, body)
	}
	for _, bad := range []string{`{"sample": 2}`, `{"duration": "soon"}`, `{"redact": ["X=shred"]}`, `{"path": "/etc/passwd"}`, `{`} {
		if code, body := adminDo(t, http.MethodPost, base+RecordStartPath, bad); code != http.StatusBadRequest {
			t.Fatalf("start with %s: %d %s, want 400", bad, code, body)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("refused starts left %d files", len(entries))
	}
	code, body := adminDo(t, http.MethodPost, base+RecordStartPath, `{"answers": true, "routes": ["Bench/*"]}`)
	var st RecordingStatus
	if err := json.Unmarshal(body, &st); code != http.StatusCreated || err != nil || !st.Running || filepath.Dir(st.File) != dir {
		t.Fatalf("start: %d %s (%v), want 201, running, a file in %s", code, body, err, dir)
	}
	if code, body := adminDo(t, http.MethodPost, base+RecordStartPath, `{}`); code != http.StatusConflict {
		t.Fatalf("a second start: %d %s, want 409", code, body)
	}
	if code, _ := adminDo(t, http.MethodGet, base+RecordFilePath, ""); code != http.StatusConflict {
		t.Fatalf("fetching a running recording: %d, want 409", code)
	}
	sent := append(echoCalls(t, d, 7), echoCalls(t, d, 5)...)
	if code, body := adminDo(t, http.MethodGet, base+RecordPath, ""); code != http.StatusOK || !strings.Contains(string(body), `"running": true`) {
		t.Fatalf("status while running: %d %s", code, body)
	}
	code, body = adminDo(t, http.MethodPost, base+RecordStopPath, "")
	if err := json.Unmarshal(body, &st); code != http.StatusOK || err != nil || st.Running || st.Ended != "stopped" || st.Stats.Conns != 2 || st.Stats.Calls < int64(len(sent)) {
		t.Fatalf("stop: %d %s (%v), want 200, stopped, 2 connections, %d calls", code, body, err, len(sent))
	}
	if code, _ := adminDo(t, http.MethodPost, base+RecordStopPath, ""); code != http.StatusConflict {
		t.Fatalf("a second stop: %d, want 409", code)
	}
	fi, err := os.Stat(st.File)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the recording's file: %v, mode %v, want 0600", err, fi.Mode().Perm())
	}

	code, fetched := adminDo(t, http.MethodGet, base+RecordFilePath, "")
	onDisk, _ := os.ReadFile(st.File)
	if code != http.StatusOK || !bytes.Equal(fetched, onDisk) {
		t.Fatalf("fetch: %d, %d bytes; the file has %d", code, len(fetched), len(onDisk))
	}
	r, err := record.Open(st.File)
	if err != nil {
		t.Fatal(err)
	}
	var asked, answered []string
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading the recording back: %v", err)
		}
		if e.Type != record.EntryFrame {
			continue
		}
		switch {
		case !e.Out && e.Frame.Kind == proto.KindRequest && string(e.Frame.Route) == builtin.EchoPacket:
			asked = append(asked, string(e.Frame.Payload))
		case e.Out && e.Frame.Kind == proto.KindResponse:
			answered = append(answered, string(e.Frame.Payload))
		}
	}
	if strings.Join(asked, " ") != strings.Join(sent, " ") || strings.Join(answered, " ") != strings.Join(sent, " ") {
		t.Fatalf("recorded requests %q and answers %q, want %q each", asked, answered, sent)
	}
}

// TestRecordingNeedsAuthentication: on an admin listener that is not on
// loopback (the test's is, so the daemon is told otherwise: the house
// tests listen on loopback alone), recording is refused with 403 when no
// authentication is configured, and with 401 to a request without the
// token when a token is; with it, it starts.
func TestRecordingNeedsAuthentication(t *testing.T) {
	notLoopback := func(net.Addr) bool { return false }
	t.Run("none configured", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.RecordDir = t.TempDir()
		d := newAdmin(t, cfg, notLoopback)
		base := "http://" + d.AdminAddr().String()
		for _, tc := range []struct{ method, path string }{{"POST", RecordStartPath}, {"POST", RecordStopPath}, {"GET", RecordFilePath}, {"GET", RecordPath}} {
			if code, body := adminDo(t, tc.method, base+tc.path, "{}"); code != http.StatusForbidden || !strings.Contains(string(body), "admin-token-file") {
				t.Errorf("%s %s: %d %s, want 403 saying what to configure", tc.method, tc.path, code, body)
			}
		}
		if code, _ := adminDo(t, http.MethodGet, base+"/metrics", ""); code != http.StatusOK {
			t.Errorf("GET /metrics: %d, want 200: only recording needs authentication", code)
		}
		if entries, _ := os.ReadDir(cfg.RecordDir); len(entries) != 0 {
			t.Errorf("record-dir holds %d files", len(entries))
		}
	})
	t.Run("token configured", func(t *testing.T) {
		dir := t.TempDir()
		tokenFile := filepath.Join(dir, "token")
		writeFile(t, tokenFile, "tok-rec\n")
		cfg := DefaultConfig()
		cfg.RecordDir = filepath.Join(dir, "recordings")
		if err := os.Mkdir(cfg.RecordDir, 0o700); err != nil {
			t.Fatal(err)
		}
		cfg.AdminTokenFile = tokenFile
		d := newAdmin(t, cfg, notLoopback)
		base := "http://" + d.AdminAddr().String()
		for _, tc := range []struct{ method, path string }{{"POST", RecordStartPath}, {"GET", RecordFilePath}, {"POST", RecordStopPath}} {
			for _, auth := range []string{"", "Bearer tok-wrong"} {
				if code, _ := adminDo(t, tc.method, base+tc.path, "{}", "Authorization", auth); code != http.StatusUnauthorized {
					t.Errorf("%s %s with %q: %d, want 401", tc.method, tc.path, auth, code)
				}
			}
		}
		if entries, _ := os.ReadDir(cfg.RecordDir); len(entries) != 0 {
			t.Fatalf("an unauthenticated start made %d files", len(entries))
		}
		if code, body := adminDo(t, http.MethodPost, base+RecordStartPath, "{}", "Authorization", "Bearer tok-rec"); code != http.StatusCreated {
			t.Fatalf("start with the token: %d %s, want 201", code, body)
		}
		if code, body := adminDo(t, http.MethodPost, base+RecordStopPath, "", "Authorization", "Bearer tok-rec"); code != http.StatusOK {
			t.Fatalf("stop with the token: %d %s, want 200", code, body)
		}
	})
}

// newAdmin runs a daemon with an admin listener on loopback that it takes
// as loopback or not as loopback says.
func newAdmin(t *testing.T, cfg Config, loopback func(net.Addr) bool) *Daemon {
	t.Helper()
	cfg.Addr, cfg.Admin = "127.0.0.1:0", "127.0.0.1:0"
	d, err := New(cfg, WithLogOutput(&syncBuffer{}))
	if err != nil {
		t.Fatal(err)
	}
	d.loopback = loopback
	run(t, d)
	return d
}

// TestRecordFromTheStart: Config.Record records from the first
// connection, with its limits, and the file is complete once Run returns.
func TestRecordFromTheStart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "start.rec")
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Record, cfg.RecordAnswers, cfg.RecordRedact = file, true, "Bench/Echo*=drop"
	d, err := New(cfg, WithLogOutput(&syncBuffer{}))
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, d)
	sent := echoCalls(t, d, 4)
	if st := d.Recording(); !st.Running || st.File != file {
		t.Fatalf("Recording: %+v, want running into %s", st, file)
	}
	if _, err := d.StartRecording("", record.Options{}); !errors.Is(err, ErrRecordingRunning) {
		t.Fatalf("StartRecording while one runs: %v, want ErrRecordingRunning", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if st := d.Recording(); st.Running || st.Ended != "stopped" {
		t.Fatalf("Recording after Run: %+v", st)
	}
	r, err := record.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	if h := r.Header(); h.Server != d.Addr().String() || h.Source != "server" {
		t.Fatalf("the header says server %q, source %q; want %s, server", h.Server, h.Source, d.Addr())
	}
	calls := 0
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading: %v", err)
		}
		if e.Type == record.EntryFrame && !e.Out && e.Frame.Kind == proto.KindRequest {
			if e.Redacted != record.Drop || len(e.Frame.Payload) != 0 || e.PayloadLen != len(sent[calls]) {
				t.Fatalf("call %d: redacted %v, payload %q, length %d; want dropped, length %d", calls, e.Redacted, e.Frame.Payload, e.PayloadLen, len(sent[calls]))
			}
			calls++
		}
	}
	if calls != len(sent) {
		t.Fatalf("%d calls recorded, want %d", calls, len(sent))
	}
}

// TestRecordSettingsMistakes: a -record-redact rule that does not parse
// is a ConfigError naming the setting, found by New.
func TestRecordSettingsMistakes(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Record, cfg.RecordRedact = filepath.Join(t.TempDir(), "r.rec"), "Bench/*=keep;Users/*=shred"
	_, err := New(cfg)
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "record-redact") {
		t.Fatalf("New: %v, want a ConfigError naming record-redact", err)
	}
}
