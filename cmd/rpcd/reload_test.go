package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rpcd/rpcd/client"
	"github.com/rpcd/rpcd/handler"
)

// TestProcessReload runs `rpcd serve -config FILE` as a process and
// reloads it with SIGHUP: a token added to the token file authenticates a
// new connection, a token removed is refused, a connection open before
// keeps serving, and a setting that needs an upgrade is named; then a bad
// file changes nothing, every one of its mistakes is logged, and /metrics
// counts the generation and the refusal; SIGTERM still drains.
func TestProcessReload(t *testing.T) {
	needSignals(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	replaceFile(t, tokens, "tok-a alice\n")
	file := writeConfig(t, "auth-tokens: "+tokens+"\nadmin: 127.0.0.1:0\n")
	d := startServe(t, "-config", file, "-log-format", "json")
	admin := adminAddr(t, d.log.String())

	dial := func(token string) (*client.Client, error) {
		ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
		defer cancel()
		c, err := client.Dial(ctx, d.addr, client.Options{MaxRetries: -1, Credentials: &client.Credentials{Secret: []byte(token)}})
		if err == nil {
			t.Cleanup(func() { c.Close() })
			err = c.Call(ctx, "Sys/Ping", nil, nil)
		}
		return c, err
	}
	old, err := dial("tok-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dial("tok-b"); !errors.Is(err, handler.ErrUnauthenticated) {
		t.Fatalf("tok-b before the reload: %v, want refused", err)
	}

	replaceFile(t, tokens, "tok-b bob\n")
	replaceFile(t, file, "auth-tokens: "+tokens+"\nadmin: 127.0.0.1:0\nmax-conns: 50\n")
	hangUp(t, d, `"generation":2`)
	if _, err := dial("tok-b"); err != nil {
		t.Errorf("tok-b, added, on a new connection: %v", err)
	}
	if _, err := dial("tok-a"); !errors.Is(err, handler.ErrUnauthenticated) {
		t.Errorf("tok-a, removed, on a new connection: %v, want refused", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	if err := old.Call(ctx, "Sys/Ping", nil, nil); err != nil {
		t.Errorf("the connection tok-a opened before the reload: %v", err)
	}
	if up := logRecords(d.log.String(), "rpcd: settings changed that need an upgrade; their old values are kept"); len(up) != 1 || up[0]["settings"] != "max-conns" {
		t.Errorf("the warning of max-conns: %v\n%s", up, d.log.String())
	}

	replaceFile(t, file, "auth-tokens: "+filepath.Join(dir, "missing")+"\nmax-conns: lots\nrate-limit: nope\nbogus: 1\n")
	hangUp(t, d, "rpcd: reload refused")
	var mistakes []string
	for _, rec := range logRecords(d.log.String(), "rpcd: reload: a mistake in the configuration") {
		mistakes = append(mistakes, rec["err"].(string))
	}
	want := []string{
		file + `:2: max-conns: want an integer, got the string "lots"`,
		file + `:4: unknown key "bogus"`,
		`-rate-limit "nope" is not ROUTE=RATE[:BURST] (-rate-limit from ` + file + `:3)`,
		"-auth-tokens: reading tokens: open " + filepath.Join(dir, "missing") + ": no such file or directory (-auth-tokens from " + file + ":1)",
	}
	if len(mistakes) != len(want) {
		t.Errorf("the mistakes logged:\n%s\nwant:\n%s", strings.Join(mistakes, "\n"), strings.Join(want, "\n"))
	}
	for i := range min(len(mistakes), len(want)) {
		if !strings.HasPrefix(mistakes[i], want[i]) {
			t.Errorf("mistake %d: %q, want it to begin %q", i, mistakes[i], want[i])
		}
	}
	if _, err := dial("tok-b"); err != nil {
		t.Errorf("tok-b after the bad file: %v", err)
	}
	if _, err := dial("tok-a"); err == nil {
		t.Error("tok-a after the bad file: accepted")
	}
	series := scrapeConfig(t, admin)
	if series["rpcd_config_generation"] != "2" || series["rpcd_config_reloads_failed_total"] != "1" {
		t.Errorf("/metrics after a reload and a refusal: %v", series)
	}
	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit status %d after SIGTERM; log:\n%s", code, d.log.String())
	}
}

// replaceFile writes text to path whole, by a rename.
func replaceFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path+".new", []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// hangUp sends d SIGHUP and waits for its log to have a new line with
// want.
func hangUp(t *testing.T, d *daemon, want string) {
	t.Helper()
	before := strings.Count(d.log.String(), want)
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(startTimeout); strings.Count(d.log.String(), want) == before; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log %v after SIGHUP:\n%s", want, startTimeout, d.log.String())
		}
	}
}

// logRecords returns the records of a JSON log whose message is msg.
func logRecords(log, msg string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(log, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// scrapeConfig returns the rpcd_config_ series of the admin listener's
// /metrics, by name, as text.
func scrapeConfig(t *testing.T, admin string) map[string]string {
	t.Helper()
	hc := &http.Client{Timeout: runTimeout, Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^(rpcd_config_\w+) (\S+)$`).FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = m[2]
	}
	return out
}
