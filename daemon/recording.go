package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rpcd/rpcd/gateway"
	"github.com/rpcd/rpcd/record"
)

// Recording the traffic the RPC port serves (package record), on a live
// server: from the start with Config.Record, and from the admin listener
// or the Go API at any time, one recording at a time. The recorder is the
// reactor's tap (reactor.Server.SetTap) while it runs; a watcher takes it
// off once the recording ends by itself (its Duration or MaxBytes).

// The admin listener's recording paths: POST RecordStartPath with a JSON
// RecordingOptions starts a recording into a file of Config.RecordDir the
// server names; POST RecordStopPath stops it; GET RecordPath says how it
// goes (RecordingStatus); GET RecordFilePath fetches the last recording
// they made, once it has ended. They need the admin listener's
// authentication, and, on a listener that is not on loopback, refuse to
// run without one (403).
const (
	RecordPath      = "/record"
	RecordStartPath = "/record/start"
	RecordStopPath  = "/record/stop"
	RecordFilePath  = "/record/file"
)

// ErrRecordingRunning is StartRecording's error while a recording runs;
// ErrNoRecording StopRecording's when none does.
var (
	ErrRecordingRunning = errors.New("rpcd: a recording is running already")
	ErrNoRecording      = errors.New("rpcd: no recording is running")
)

// RecordingOptions are a recording's limits as POST RecordStartPath takes
// them, in JSON: record.Options' fields, Duration as text ("30s") and
// Redact as record.ParseRedaction's rules ("Users/*=drop").
type RecordingOptions struct {
	Duration string   `json:"duration,omitempty"`
	MaxBytes int64    `json:"max_bytes,omitempty"`
	Sample   float64  `json:"sample,omitempty"`
	Routes   []string `json:"routes,omitempty"`
	Redact   []string `json:"redact,omitempty"`
	Answers  bool     `json:"answers,omitempty"`
}

// Options returns the record.Options o gives, or why it gives none.
func (o RecordingOptions) Options() (record.Options, error) {
	ro := record.Options{MaxBytes: o.MaxBytes, Sample: o.Sample, Routes: o.Routes, Answers: o.Answers}
	if o.Duration != "" {
		d, err := time.ParseDuration(o.Duration)
		if err != nil || d < 0 {
			return ro, fmt.Errorf("rpcd: duration %q, want a duration such as 30s", o.Duration)
		}
		ro.Duration = d
	}
	for _, s := range o.Redact {
		r, err := record.ParseRedaction(s)
		if err != nil {
			return ro, err
		}
		ro.Redact = append(ro.Redact, r)
	}
	return ro, nil
}

// RecordingStatus is a recording's state: the one running, else the last
// one that ended.
type RecordingStatus struct {
	File    string       `json:"file,omitempty"`    // its path
	Running bool         `json:"running"`           // false once it has ended, or when there is none
	Started time.Time    `json:"started,omitempty"` // when it started
	Stats   record.Stats `json:"stats"`             // its figures so far, or at its end
	Ended   string       `json:"ended,omitempty"`   // why it ended: stopped, duration, max bytes, failed
	Err     string       `json:"error,omitempty"`   // the error that ended it
}

// recording is the daemon's recording state.
type recording struct {
	mu      sync.Mutex
	cur     *record.Recorder // the one running; nil for none
	status  RecordingStatus  // cur's, or the last one's
	fetch   string           // the last recording the admin listener made, once ended: what RecordFilePath serves
	pending string           // the file of the one running, if the admin listener started it
	seq     int              // recordings the admin listener named
}

// StartRecording records the traffic of the RPC port, from each
// connection's next frame, into a new file at path (mode 0600; an
// existing file is refused), or, for an empty path, into a file of
// Config.RecordDir named by the daemon. It returns the file's path.
// Source and Server are set to the daemon's. One recording runs at a
// time: ErrRecordingRunning while one does.
func (d *Daemon) StartRecording(path string, o record.Options) (string, error) {
	return d.startRecording(path, o, nil, false)
}

// startRecording starts a recording of the RPC port at addr (nil: the
// one it serves on).
func (d *Daemon) startRecording(path string, o record.Options, addr net.Addr, fromAdmin bool) (string, error) {
	d.rec.mu.Lock()
	defer d.rec.mu.Unlock()
	if d.rec.cur != nil {
		return "", ErrRecordingRunning
	}
	if path == "" {
		dir := d.cfg.RecordDir
		if dir == "" {
			dir = os.TempDir()
		}
		d.rec.seq++
		path = filepath.Join(dir, fmt.Sprintf("rpcd-%s-%d-%d.rec", time.Now().UTC().Format("20060102T150405Z"), os.Getpid(), d.rec.seq))
	}
	o.Source = "server"
	if addr == nil {
		addr = d.srv.Addr()
	}
	if o.Server = d.cfg.Addr; addr != nil {
		o.Server = addr.String()
	}
	r, err := record.Create(path, o)
	if err != nil {
		return "", err
	}
	d.rec.cur = r
	d.rec.status = RecordingStatus{File: path, Running: true, Started: time.Now()}
	d.rec.pending = ""
	if fromAdmin {
		d.rec.pending = path
	}
	d.srv.SetTap(r)
	d.log.Info("rpcd: recording", "file", path, "duration", o.Duration, "max-bytes", o.MaxBytes, "sample", o.Sample, "routes", strings.Join(o.Routes, ","), "answers", o.Answers)
	go func() {
		<-r.Done() // stopped, or ended by itself
		d.endRecording(r)
	}()
	return path, nil
}

// StopRecording stops the recording running: the tap is taken off, the
// file completed and closed. It returns the recording's status, or
// ErrNoRecording.
func (d *Daemon) StopRecording() (RecordingStatus, error) {
	d.rec.mu.Lock()
	r := d.rec.cur
	d.rec.mu.Unlock()
	if r == nil {
		return d.Recording(), ErrNoRecording
	}
	d.endRecording(r)
	return d.Recording(), nil
}

// Recording returns the status of the recording running, or of the last
// one, whose Running is then false.
func (d *Daemon) Recording() RecordingStatus {
	d.rec.mu.Lock()
	defer d.rec.mu.Unlock()
	st := d.rec.status
	if d.rec.cur != nil {
		st.Stats = d.rec.cur.Stats()
	}
	return st
}

// endRecording takes r off the reactor and ends it, once, whoever asks
// first: StopRecording, the watcher when r ended by itself, the drain.
func (d *Daemon) endRecording(r *record.Recorder) {
	d.rec.mu.Lock()
	defer d.rec.mu.Unlock()
	if d.rec.cur != r {
		return // ended already
	}
	if d.srv.Tap() == r {
		d.srv.SetTap(nil) // each connection closed on it before Stop writes the end
	}
	st, err := r.Stop()
	d.rec.cur = nil
	d.rec.status.Running, d.rec.status.Stats, d.rec.status.Ended = false, st, st.Ended.String()
	if err != nil {
		d.rec.status.Err = err.Error()
	}
	if d.rec.pending != "" {
		d.rec.fetch, d.rec.pending = d.rec.pending, ""
	}
	d.log.Info("rpcd: recording ended", "file", d.rec.status.File, "why", st.Ended.String(), "conns", st.Conns, "calls", st.Calls, "bytes", st.Bytes, "lost", st.Lost, "err", err)
}

// stopRecording ends the recording running, if any: the daemon stops.
func (d *Daemon) stopRecording() {
	d.rec.mu.Lock()
	r := d.rec.cur
	d.rec.mu.Unlock()
	if r != nil {
		d.endRecording(r)
	}
}

// startConfigRecording starts Config.Record's recording, with the
// Record* settings' limits, before the RPC port serves at addr.
func (d *Daemon) startConfigRecording(addr net.Addr) error {
	if d.cfg.Record == "" {
		return nil
	}
	o, err := d.cfg.recordOptions()
	if err != nil {
		return err
	}
	_, err = d.startRecording(d.cfg.Record, o, addr, false)
	return err
}

// recordOptions returns the record.Options of the Record* settings.
func (c *Config) recordOptions() (record.Options, error) {
	o := record.Options{Duration: c.RecordDuration, MaxBytes: c.RecordMaxBytes, Sample: c.RecordSample, Answers: c.RecordAnswers}
	for _, r := range strings.Split(c.RecordRoutes, ",") {
		if r = strings.TrimSpace(r); r != "" {
			o.Routes = append(o.Routes, r)
		}
	}
	for _, s := range strings.Split(c.RecordRedact, ";") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		r, err := record.ParseRedaction(s)
		if err != nil {
			return o, configErrorf("%s: %s", key("record-redact"), bare(err))
		}
		o.Redact = append(o.Redact, r)
	}
	return o, nil
}

// checkRecord is New's check of the Record* settings' texts.
func (c *Config) checkRecord() error {
	if c.Record == "" {
		return nil
	}
	_, err := c.recordOptions()
	return err
}

// recordHandler serves the recording paths on the admin listener at
// addr, and next the rest.
func (d *Daemon) recordHandler(addr net.Addr, next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", next)
	guard := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			// Authenticated already if the listener asks for it (admin.Require).
			if !d.adminAuth.Configured() && !d.loopback(addr) {
				http.Error(w, "rpcd: recording from an admin listener that is not on loopback needs its authentication: set admin-token-file, or admin-tls-cert, admin-tls-key and admin-client-ca", http.StatusForbidden)
				return
			}
			w.Header().Set("Cache-Control", "no-store")
			h(w, r)
		}
	}
	mux.HandleFunc("POST "+RecordStartPath, guard(d.serveRecordStart))
	mux.HandleFunc("POST "+RecordStopPath, guard(d.serveRecordStop))
	mux.HandleFunc("GET "+RecordPath, guard(func(w http.ResponseWriter, r *http.Request) { d.writeRecording(w, r, http.StatusOK) }))
	mux.HandleFunc("GET "+RecordFilePath, guard(d.serveRecordFile))
	return mux
}

// maxRecordBody bounds a start's JSON body.
const maxRecordBody = 64 << 10

func (d *Daemon) serveRecordStart(w http.ResponseWriter, r *http.Request) {
	var ro RecordingOptions
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRecordBody))
	if err == nil && len(strings.TrimSpace(string(body))) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.DisallowUnknownFields()
		err = dec.Decode(&ro)
	}
	var o record.Options
	if err == nil {
		o, err = ro.Options()
	}
	if err != nil {
		http.Error(w, "rpcd: the recording's options: "+strings.TrimPrefix(err.Error(), "rpcd: "), http.StatusBadRequest)
		return
	}
	if _, err := d.startRecording("", o, nil, true); err != nil {
		var pe *fs.PathError
		code := http.StatusBadRequest // the options, as record judged them
		if errors.Is(err, ErrRecordingRunning) {
			code = http.StatusConflict
		} else if errors.As(err, &pe) {
			code = http.StatusInternalServerError // record-dir cannot be written
		}
		http.Error(w, err.Error(), code)
		return
	}
	d.writeRecording(w, r, http.StatusCreated)
}

func (d *Daemon) serveRecordStop(w http.ResponseWriter, r *http.Request) {
	if _, err := d.StopRecording(); err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	d.writeRecording(w, r, http.StatusOK)
}

// serveRecordFile serves the last recording the admin listener started,
// once it has ended: the file's name is the daemon's, never the request's.
func (d *Daemon) serveRecordFile(w http.ResponseWriter, r *http.Request) {
	d.rec.mu.Lock()
	path, running := d.rec.fetch, d.rec.pending != ""
	d.rec.mu.Unlock()
	switch {
	case running && path == "":
		http.Error(w, "rpcd: the recording is running: stop it first", http.StatusConflict)
		return
	case path == "":
		http.Error(w, "rpcd: no recording made from the admin listener has ended", http.StatusNotFound)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		http.Error(w, "rpcd: "+err.Error(), http.StatusGone)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		http.Error(w, "rpcd: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="`+filepath.Base(path)+`"`)
	http.ServeContent(w, r, filepath.Base(path), fi.ModTime(), f)
}

// writeRecording answers with the recording's status in JSON.
func (d *Daemon) writeRecording(w http.ResponseWriter, r *http.Request, code int) {
	b, err := json.MarshalIndent(d.Recording(), "", " ")
	if err != nil {
		http.Error(w, "rpcd: "+err.Error(), http.StatusInternalServerError)
		return
	}
	gateway.Write(w, r, code, "application/json", append(b, '\n'), d.cfg.CompressMin)
}
